"""Ray token authentication for the private Ray heads this project starts, and the user's own token mode.

A Ray head without authentication runs whatever any process that reaches its dashboard or GCS port submits (the
exposure behind public Ray-cluster compromises); a head on 127.0.0.1 is still open to every user and process of
the host. So every head the project starts gets a fresh token (256 bits, as Ray's own generator) in a file of mode
0600 inside a private 0700 temp dir, which also holds Ray's own temp dir (Ray makes that 0777). The head, its job
driver and its workers read it through Ray's variables (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN_PATH``: the path,
never the token, so the token shows neither in ``ps`` nor in the job's runtime env); clients send it as an
``Authorization: Bearer`` header. Nothing is written under ``~/.ray`` (Ray's default token place, which a
``ray.init()`` without a token creates world-readable).

A user's own ``RAY_AUTH_MODE=token`` needs a token for the cluster the user points at: ``RAY_AUTH_TOKEN``, a
readable ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``. Without one, Ray fails only after its start-up waits,
so :func:`user_auth_problem` says so at once.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

AUTH_MODE_VAR = "RAY_AUTH_MODE"
TOKEN_VAR = "RAY_AUTH_TOKEN"
TOKEN_PATH_VAR = "RAY_AUTH_TOKEN_PATH"
#: Ray's own variables; a private head's processes get ours, never the user's.
AUTH_VARS = (AUTH_MODE_VAR, TOKEN_VAR, TOKEN_PATH_VAR)


class RayAuthError(ValueError):
    """Token auth was asked for without a token; the message says where Ray looks for one."""


@dataclass(frozen=True)
class PrivateRayAuth:
    """A private 0700 dir holding a fresh 0600 token file (and the head's Ray temp dir, ``ray_temp_dir``)."""

    root: Path
    token_path: Path

    @classmethod
    def create(cls, prefix: str = "gpray-") -> PrivateRayAuth:
        # /tmp and a short name: Ray's unix socket paths under the temp dir must stay < 108 bytes
        root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))  # mkdtemp: mode 0700, owned by us
        os.chmod(root, 0o700)
        token_path = root / "auth_token"
        fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_hex(32).encode("ascii"))
        finally:
            os.close(fd)
        return cls(root, token_path)

    @property
    def ray_temp_dir(self) -> Path:
        return self.root / "r"

    @property
    def token(self) -> str:
        return self.token_path.read_text(encoding="ascii").strip()

    def env(self) -> dict[str, str]:
        """What the head's processes (and a job's driver and workers, which inherit it) need."""
        return {AUTH_MODE_VAR: "token", TOKEN_PATH_VAR: str(self.token_path)}

    def process_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the user's Ray auth variables replaced by ours."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if k not in AUTH_VARS}
        return {**env, **self.env()}

    def headers(self) -> dict[str, str]:
        """HTTP headers a client (``JobSubmissionClient(address, headers=...)``) sends to the head."""
        return {"Authorization": f"Bearer {self.token}"}

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def user_token(environ: Mapping[str, str] | None = None) -> str | None:
    """The user's Ray token where Ray looks for it (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray``)."""
    environ = os.environ if environ is None else environ
    if environ.get(TOKEN_VAR, "").strip():
        return environ[TOKEN_VAR].strip()
    path = environ.get(TOKEN_PATH_VAR)
    candidates = [Path(path)] if path else [Path(environ.get("HOME") or Path.home()) / ".ray" / "auth_token"]
    for candidate in candidates:
        try:
            text = candidate.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if text:
            return text
    return None


def user_auth_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the user's Ray auth settings cannot work (None when they can): token mode without a token."""
    environ = os.environ if environ is None else environ
    if environ.get(AUTH_MODE_VAR, "").strip().lower() != "token" or user_token(environ) is not None:
        return None
    where = (f"{TOKEN_PATH_VAR}={environ[TOKEN_PATH_VAR]} is missing, unreadable or empty"
             if environ.get(TOKEN_PATH_VAR) else f"neither {TOKEN_VAR}, {TOKEN_PATH_VAR} nor ~/.ray/auth_token is set")
    return (f"{AUTH_MODE_VAR}=token but no Ray auth token: {where}. Give the cluster's token, or unset "
            f"{AUTH_MODE_VAR} to let the project start its own authenticated head")


def check_user_auth(environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`RayAuthError` for token mode without a token (checked before anything starts)."""
    problem = user_auth_problem(environ)
    if problem:
        raise RayAuthError(problem)


def user_headers(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Authorization header for a user's token-auth cluster ({} when token mode is off or no token)."""
    environ = os.environ if environ is None else environ
    if environ.get(AUTH_MODE_VAR, "").strip().lower() != "token":
        return {}
    token = user_token(environ)
    return {"Authorization": f"Bearer {token}"} if token else {}
