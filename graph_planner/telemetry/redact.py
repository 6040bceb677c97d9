"""Keep secrets out of tracker configs and logs: drop secret-looking keys and any value holding a known secret.

`graph_planner.config.loader.config_to_dict` already blanks the declared secret fields; this is the second line
of defence for secrets that arrive elsewhere (a token in ``verl_overrides``, a key pasted into ``notes``).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, SecretStr

#: Key segments (split on ``_ . - /`` and case changes) that mark a value as secret.
SECRET_SEGMENTS = frozenset({"token", "password", "passwd", "secret", "apikey", "credentials"})
#: Environment variables whose values are secrets even when no config field names them.
SECRET_ENV_VARS = ("WANDB_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY")
#: Adjacent segment pairs that mark a secret (``api_key``, ``aws_access_key_id``, ``ssh_private_key``).
SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key")})
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_SPLIT = re.compile(r"[_.\-/\s]+")
_MIN_SECRET_LEN = 6  # shorter values would redact ordinary words


def _segments(key: str) -> list[str]:
    key = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    return [s for s in _SPLIT.split(key.lower()) if s]


def is_secret_key(key: str, value: Any = None) -> bool:
    """True for keys like ``hf_token``, ``api_key``, ``db.password``, ``client_secret``.

    ``max_new_tokens`` or ``planner_tokenizer`` are not secrets (whole segments are compared). A key ending in
    ``_env`` whose value is an environment variable *name* (``planner_api_key_env: PLANNER_API_KEY``) names
    where a secret lives, not the secret, and is kept.
    """
    parts = _segments(key)
    if parts and parts[-1] == "env" and (value is None or (isinstance(value, str) and _ENV_NAME.match(value))):
        return False
    if SECRET_SEGMENTS.intersection(parts):
        return True
    return any(pair in SECRET_PAIRS for pair in itertools.pairwise(parts))


def secret_values(config: BaseModel | None = None, env: Mapping[str, str] | None = None) -> set[str]:
    """Known secret strings: every SecretStr in ``config``, the secret env vars, and the env vars it names."""
    env = os.environ if env is None else env
    found: set[str] = set()
    names: set[str] = set(SECRET_ENV_VARS)

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, SecretStr):
            found.add(node.get_secret_value())
        elif isinstance(node, BaseModel):
            for name in type(node).model_fields:
                walk(getattr(node, name), name)
        elif isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key.endswith("_env") and _ENV_NAME.match(node):
            names.add(node)

    if config is not None:
        walk(config)
    found.update(env[name] for name in names if env.get(name))
    return {s for s in found if len(s) >= _MIN_SECRET_LEN}


def scrub(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of ``value`` with secret-looking keys set to None and strings containing a secret blanked."""
    secrets = tuple(secrets)
    if isinstance(value, Mapping):
        return {
            k: (None if is_secret_key(str(k), v) and v is not None else scrub(v, secrets))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, SecretStr):
        return None
    if isinstance(value, str) and any(s in value for s in secrets):
        return None
    return value
