"""Build the run config: built-in defaults < YAML file < CLI flags (or YAML only), then write it to the run dir."""

from __future__ import annotations

import copy
import difflib
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from pydantic import SecretStr, ValidationError

from graph_planner.config.aliases import canonical_key, move_seed_keys
from graph_planner.config.paths import RESOLVED_CONFIG, run_paths
from graph_planner.config.run_dirs import claim_run_dir
from graph_planner.config.run_lock import run_lock
from graph_planner.config.schema import RunConfig
from graph_planner.disk import atomic_write_bytes, remove_stale_temps

log = logging.getLogger(__name__)

#: CLI names that still count under --yaml-only.
YAML_ONLY_ALLOWED = {"config_file", "yaml_only", "wandb_offline"}
#: Dotted paths of secrets: never written to disk, never sent to trackers.
SECRET_PATHS = ("logging.wandb.api_key", "data.hf_token")
RESOLVED_NAME = RESOLVED_CONFIG


class ConfigError(ValueError):
    """A config value is wrong; the message names the key and the file it came from."""


def parse_set_override(item: str) -> tuple[str, Any]:
    """Parse one ``--set a.b.c=value`` item; the value is read as YAML (numbers, bools, lists)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set training.lr=1e-6")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"--set {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Assign ``value`` at ``dotted`` inside a nested dict; verl_overrides keeps the rest of the key verbatim."""
    parts = dotted.split(".")
    if parts[0] == "verl_overrides" and len(parts) > 1:
        tree.setdefault("verl_overrides", {})[".".join(parts[1:])] = value
        return
    node = tree
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def deep_merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive dict merge; ``verl_overrides`` keys merge flat, values in ``update`` win."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping with safe_load; errors name the file."""
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: not UTF-8 (line {line}, byte {exc.start}); save the config as UTF-8") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:  # an empty file is far more often a failed write or a wrong path than "all defaults"
        raise ConfigError(f"{path}: the config file is empty (no sections); give at least one section, or leave "
                          "out -c to run on the built-in defaults")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of sections, got {type(data).__name__}")
    return data


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names (and aliases) of the config section at ``loc`` (the parent of an unknown key)."""
    model: Any = RunConfig
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        model = field.annotation
    fields = getattr(model, "model_fields", {})
    return sorted({*fields, *(f.alias for f in fields.values() if f.alias)})


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _validation_message(exc: ValidationError, source: str) -> str:
    lines = [f"invalid run config ({source}):"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<root>"
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(err["loc"][-1]), _known_keys(tuple(err["loc"][:-1])), n=3)
            hint = f"; did you mean {' or '.join('.'.join([*map(str, err['loc'][:-1]), c]) for c in close)}?" \
                if close else ""
            lines.append(f"  {key}: unknown key{hint}")
        elif err["loc"] and not isinstance(err.get("input"), Mapping):
            lines.append(f"  {key}: {err['msg']} (got {_short(err.get('input'))})")
        else:  # a section- or config-level rule: its message names the keys; the input is a whole section
            message = err["msg"].removeprefix("Value error, ")
            lines.append(f"  {message}" if key == "<root>" else f"  {key}: {message}")
    return "\n".join(lines)


def validate_tree(tree: Mapping[str, Any], source: str) -> RunConfig:
    try:
        return RunConfig.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_validation_message(exc, source)) from None


#: The setting other rules depend on (``config.algorithm.backend_problems``): a CLI value of it applies before the
#: file's own validation.
BACKEND_KEY = "training.backend"


def with_cli_backend(file_tree: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``file_tree`` with the CLI's ``training.backend`` (when given) set in a copy."""
    backend = [value for dotted, value in overrides.items() if canonical_key(dotted) == BACKEND_KEY]
    if not backend:
        return file_tree
    tree = copy.deepcopy(file_tree)
    set_dotted(tree, BACKEND_KEY, backend[-1])
    return tree


def load_run_config(
    config_file: str | Path | None = None,
    cli_overrides: Mapping[str, Any] | None = None,
    yaml_only: bool = False,
    wandb_offline: bool | None = None,
    write: bool = False,
) -> RunConfig:
    """Merge defaults < YAML < CLI into one validated RunConfig.

    ``cli_overrides`` maps dotted keys to values for every flag the user actually gave. Under ``yaml_only``
    they are ignored (each one logged) except ``--wandb-offline``. The two ``resolved_*`` fields are filled in.
    With ``write`` a run starts: its directory is claimed (an unnamed run gets a fresh ``<name>-<UTC stamp>``,
    :func:`graph_planner.config.run_dirs.claim_run_dir`) and the merged config is written there as
    ``resolved_config.yaml`` under the run lock (:func:`owned_run`; commands that hold the lock for the whole run
    load with ``write=False`` and enter :func:`owned_run` themselves); without it, an unnamed run's directory is
    the one recorded in the loaded file, else ``<output_dir>/<name>``.
    """
    tree: dict[str, Any] = {}
    source = "built-in defaults"
    overrides = dict(cli_overrides or {})
    if yaml_only and overrides:
        for name in sorted(overrides):
            shown = "<redacted>" if name in SECRET_PATHS else repr(overrides[name])
            log.warning("--yaml-only: ignoring CLI setting %s=%s", name, shown)
        overrides = {}
    if config_file is not None:
        path = Path(config_file)
        try:
            file_tree = move_seed_keys(read_yaml(path))
        except ConfigError:
            raise  # names the file already
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        # errors name the file before CLI values are mixed in, judged on the backend the run will use: a YAML of
        # verl-only keys is valid with --set training.backend=verl
        validate_tree(with_cli_backend(file_tree, overrides), str(path))
        tree = deep_merge(tree, file_tree)
        source = str(path)
    if overrides:
        source = f"{source} + CLI flags"
        for dotted, value in overrides.items():
            set_dotted(tree, canonical_key(dotted), value)
    if wandb_offline is not None:
        set_dotted(tree, "logging.wandb.offline", wandb_offline)
        if wandb_offline:
            set_dotted(tree, "logging.wandb.enabled", True)
    config = validate_tree(tree, source)
    if write:
        with owned_run(config):
            pass
    else:
        paths = run_paths(config)
        config.resolved_run_dir = str(paths.run_dir)
        config.resolved_config_path = str(paths.resolved_config)
    return config


def config_to_dict(config: RunConfig) -> dict[str, Any]:
    """Plain dict of the config with secrets removed (safe for files, trackers and logs)."""
    data = config.model_dump(mode="python")
    for dotted in SECRET_PATHS:
        node = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = None
    return _plain(data)


def _plain(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def dump_config_yaml(config: RunConfig) -> str:
    return yaml.safe_dump(config_to_dict(config), sort_keys=False)


def write_resolved_config(config: RunConfig) -> Path:
    """Write the secret-free merged config atomically (a full disk leaves the old file or none, never a 0-byte
    one); reloading it with --yaml-only gives the same config. Unchanged content is not rewritten."""
    assert config.resolved_config_path is not None
    path = Path(config.resolved_config_path)
    data = dump_config_yaml(config).encode("utf-8")
    try:
        if path.read_bytes() == data:
            return path
    except OSError:
        pass
    return atomic_write_bytes(path, data)


@contextmanager
def owned_run(config: RunConfig, lock_dir: str | None = None) -> Iterator[Path]:
    """Start a run that owns its directory: claim it, hold its lock (``<run dir>/<lock_dir>/.lock``; another
    holder raises :class:`~graph_planner.config.run_lock.RunLockedError` before anything is written), remove the
    temp files a killed writer left, then write ``resolved_config.yaml``: only the owner ever writes it. Every
    check that can refuse the run (config, inputs, "already trained") belongs before this."""
    run_dir = claim_run_dir(config)
    lock_at = run_dir / lock_dir if lock_dir else run_dir
    with run_lock(lock_at):
        remove_stale_temps(run_dir)
        if lock_at != run_dir:
            remove_stale_temps(lock_at)
        write_resolved_config(config)
        yield run_dir
