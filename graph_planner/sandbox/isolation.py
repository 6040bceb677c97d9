"""How the local backend isolates task commands (patch code and tests are untrusted) — see docs/security.md.

`bwrap` (bubblewrap, Debian package `bubblewrap`), when it works here, is the wrapper: a new mount namespace that
holds only the system directories (/usr, /bin, /lib*, /etc without shadow files or ssh keys) and the Python
interpreter's prefixes, all read-only, plus the sandbox's own temp dir (the repo copy) read-write and an empty
/tmp; no network (own network namespace, loopback only), own pid/ipc/uts namespaces (every process a test leaves
behind dies with the command), and no capabilities (root inside cannot remount the host read-write, which it can
under bwrap's defaults). The host's home directories, datasets (with gold patches and hidden tests), run outputs,
the Docker socket and other users' /tmp are simply not there.

Without bwrap, `unshare -n` (or `unshare -rn`) cuts the network only; with neither, nothing is isolated and a
warning says so. Every mode runs commands with a minimal environment: no HF_TOKEN, WANDB_API_KEY, *_API_KEY or
any other variable of the caller, only PATH, HOME / TMPDIR inside the sandbox, locale, safe git settings and the
task's own `env`.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from graph_planner.sandbox.history import SAFE_GIT_ENV

log = logging.getLogger(__name__)

IsolationMode = Literal["auto", "bwrap", "netns", "none"]
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt/conda")
#: Inside /etc: files with secrets, hidden from task code.
_ETC_MASKED = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssh", "/etc/sudoers",
               "/etc/sudoers.d", "/etc/docker", "/etc/containerd")
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Isolation:
    """The argv prefix for one sandbox and what it isolates (for logs and reports)."""

    kind: Literal["bwrap", "netns", "none"]
    prefix: tuple[str, ...]
    isolates: str


def interpreter_dirs() -> list[str]:
    """Directories the task's Python needs (venv and base installation), real paths, no duplicates."""
    dirs: list[str] = []
    for raw in (sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent.parent)):
        real = os.path.realpath(raw)
        if real not in dirs and not any(real == d or real.startswith(d + "/") for d in _SYSTEM_DIRS):
            dirs.append(real)
    return dirs


def bwrap_argv(root: Path, network: bool) -> list[str]:
    """bubblewrap argv prefix exposing only system dirs + interpreter (read-only) and ``root`` (read-write)."""
    argv = ["bwrap"]
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in _ETC_MASKED:
        if os.path.isdir(path) and not os.path.islink(path):
            argv += ["--tmpfs", path]
        elif os.path.exists(path):
            argv += ["--ro-bind", "/dev/null", path]
    argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/var/tmp"]
    # after the empty /tmp: bwrap mounts in argv order, so a venv or checkout under /tmp (a CI clone) stays visible
    for path in interpreter_dirs():
        argv += ["--ro-bind", path, path]
    argv += ["--bind", str(root), str(root),
             "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "gp-sandbox",
             "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if not network:
        argv.append("--unshare-net")
    return argv


def _probe(argv: list[str], cwd: str | None = None) -> bool:
    try:
        return subprocess.run(argv, check=False, capture_output=True, timeout=20, cwd=cwd).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """True when bubblewrap runs the full wrapper here (probed once: user namespaces may be disabled)."""
    if shutil.which("bwrap") is None:
        return False
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gp-bwrap-probe-") as tmp:
        return _probe([*bwrap_argv(Path(tmp), network=False), "bash", "-c", f"touch {tmp}/ok"], cwd=tmp) and \
            Path(tmp, "ok").exists()


@lru_cache(maxsize=1)
def network_cut_prefix() -> tuple[str, ...] | None:
    """argv prefix that only cuts the network: `unshare -n` (root) or `unshare -rn` (user namespaces)."""
    candidates: list[tuple[str, ...]] = []
    if shutil.which("unshare"):
        if os.geteuid() == 0:
            candidates.append(("unshare", "-n"))
        candidates.append(("unshare", "-rn"))
    for prefix in candidates:
        if _probe([*prefix, "true"]):
            return prefix
    return None


def choose_isolation(mode: IsolationMode, root: Path, network: bool) -> Isolation:
    """The strongest wrapper ``mode`` allows on this machine; ``bwrap`` demanded but unusable is an error."""
    if mode in ("auto", "bwrap") and bwrap_works():
        what = "read-only system dirs + interpreter, writable repo copy only, own pid/ipc namespaces, no caps"
        return Isolation("bwrap", tuple(bwrap_argv(root, network)), what + ("" if network else ", no network"))
    if mode == "bwrap":
        raise RuntimeError("sandbox.local_isolation=bwrap but bubblewrap does not work here (apt-get install "
                           "bubblewrap; user namespaces must be allowed): use auto/netns, or --sandbox docker")
    if mode in ("auto", "netns") and not network:
        prefix = network_cut_prefix()
        if prefix is not None:
            return Isolation("netns", prefix, "network only (the host filesystem is visible and writable)")
    return Isolation("none", (), "nothing: commands run on the host as this user, with its filesystem" +
                     ("" if network else " and network"))


def minimal_env(root: Path, task_env: dict[str, str], isolate_pytest_plugins: bool) -> dict[str, str]:
    """The whole environment of a task command: nothing of the caller's (no tokens, no API keys)."""
    home, tmp = root / "home", root / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    env = {
        # the real path of the interpreter's dir (not of the interpreter): a symlinked venv is bound at its real path
        "PATH": os.pathsep.join([os.path.realpath(Path(sys.executable).parent), _SYSTEM_PATH]),
        "HOME": str(home), "TMPDIR": str(tmp), "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1", **SAFE_GIT_ENV,
    }
    if isolate_pytest_plugins:
        # the host venv's pytest plugins (hydra, anyio, ...) are not the task's; loading them costs ~5 s a run
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.update(task_env)
    return env
