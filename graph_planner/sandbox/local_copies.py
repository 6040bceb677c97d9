"""Temp repo copies of the local backend: each says which process owns it (an `.owner` file with the same fields as
a docker container's labels), this process removes its own at exit and on SIGTERM (never waiting on a lock), and
`gp sandbox reap` removes copies whose owner is dead (a SIGKILLed run, a lost node)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from graph_planner import termination
from graph_planner.sandbox.base import SandboxError
from graph_planner.sandbox.owner import LABEL_RUN, LABEL_TASK, owner_is_dead, owner_labels

OWNER_FILE = ".owner"
COPY_PREFIX = "gp-"

_live: set[Path] = set()
_groups: set[int] = set()  # process groups of commands running in local sandboxes
_live_lock = threading.Lock()
_T = TypeVar("_T")


def mark_owner(root: Path, run_id: str, task_id: str) -> None:
    (root / OWNER_FILE).write_text(json.dumps(owner_labels(run_id, task_id)) + "\n", encoding="utf-8")


#: Committed templates of plain source trees, most recently used last; a few are kept (each is a whole repo copy).
_templates: OrderedDict[tuple[str, str, str], tuple[Path, str]] = OrderedDict()
_template_lock = threading.Lock()
MAX_TEMPLATES = 8
#: Never copied into a sandbox: caches a host run of the source may have left.
COPY_IGNORED = ("__pycache__", ".pytest_cache")


def _tree_stamp(source: Path) -> str:
    """Paths, sizes and mtimes of ``source``'s files: a source edited since its template was built gets a new one
    (whose head then no longer matches the task's base_commit, the error a user should see)."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames[:] = sorted(d for d in dirnames if d not in COPY_IGNORED)
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            stat = os.lstat(path)
            entries.append(f"{os.path.relpath(path, source)}\0{stat.st_size}\0{stat.st_mtime_ns}")
    return hashlib.sha1("\n".join(entries).encode("utf-8", "surrogateescape")).hexdigest()


def copy_from_template(source: Path, commit: str, dest: Path, run_id: str, task_id: str,
                       build: Callable[[Path], str]) -> str:
    """Copy ``source`` to ``dest`` as a repository and return its HEAD. The repository (``build`` makes one of a
    copy and returns its HEAD) is built once per process and (source, expected ``commit``, tree stamp) and then
    copied, ``.git`` included, instead of running git init / add / commit for every sandbox (concurrent rollouts
    start dozens a step). The last :data:`MAX_TEMPLATES` are kept, removed at exit like any copy; the caller checks
    the HEAD against the commit it expects."""
    key = (str(source.resolve()), commit, _tree_stamp(source))
    with _template_lock:  # copies run under the lock too: an evicted template is never read while removed
        if key in _templates:
            _templates.move_to_end(key)
        else:
            root = Path(tempfile.mkdtemp(prefix=f"{COPY_PREFIX}template-"))
            track_copy(root)
            try:
                mark_owner(root, run_id, task_id)
                repo = root / "repo"
                copy_tree(source, repo, ignore=shutil.ignore_patterns(*COPY_IGNORED))
                _templates[key] = (repo, build(repo))
            except BaseException:
                _drop_template(root)
                raise
            while len(_templates) > MAX_TEMPLATES:
                _drop_template(_templates.popitem(last=False)[1][0].parent)
        repo, head = _templates[key]
        copy_tree(repo, dest)
        return head


def copy_tree(source: Path, dest: Path, ignore: Callable[[str, list[str]], set[str]] | None = None) -> None:
    """``shutil.copytree`` (symlinks kept) that stops at the next file once this process is signalled. A copy in
    flight in a worker thread otherwise goes on writing (copytree recreates the directories it needs) after the
    exit cleanup removed its root, and the copy outlives the process."""
    def copy_file(src: str, dst: str) -> object:
        if termination.signalled():
            raise SandboxError(f"copy of {source} stopped: the process is terminating")
        return shutil.copy2(src, dst)

    shutil.copytree(source, dest, symlinks=True, ignore=ignore, copy_function=copy_file)


def drop_templates() -> int:
    """Remove this process's templates now; returns how many. For processes that outlive their work and are
    killed rather than exited (Ray workers), whose exit cleanup never runs."""
    with _template_lock:
        roots = [repo.parent for repo, _head in _templates.values()]
        _templates.clear()
        for root in roots:
            _drop_template(root)
    return len(roots)


def _drop_template(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    release_copy(root)


def track_copy(root: Path) -> None:
    """Remember a live copy so a SIGTERM / exit of this process removes it (reaper.install_exit_cleanup). After a
    signal no new copy is started: a worker thread still running would leave it behind the exit cleanup."""
    with _live_lock:
        _live.add(root)
    if termination.signalled():
        release_copy(root)
        _rmtree(root)
        raise SandboxError(f"not starting sandbox {root}: the process is terminating")


@contextmanager
def owned_temp_dir(run_id: str, task_id: str, kind: str) -> Iterator[Path]:
    """A scratch dir under the temp dir owned like a sandbox copy (``.owner``): removed when the block ends, at
    this process's exit or SIGTERM, and by `gp sandbox reap` once its owner is dead (a SIGKILLed worker, a lost
    node). Write under the yielded ``<dir>/work``, not beside the owner file."""
    root = Path(tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{kind}-"))
    try:
        track_copy(root)
        mark_owner(root, run_id, task_id)
        (root / "work").mkdir()
        yield root / "work"
    finally:
        release_copy(root)
        _rmtree(root)


def _rmtree(root: Path) -> None:
    """Remove ``root`` even while another thread still writes into it (a copy in flight at exit)."""
    for _ in range(5):
        shutil.rmtree(root, ignore_errors=True)
        if not os.path.lexists(root):
            return


def release_copy(root: Path, lock_wait_s: float | None = None) -> None:
    if lock_wait_s is None:
        with _live_lock:
            _live.discard(root)
    else:
        _locked_or_anyway(_live_lock, lock_wait_s, lambda: _live.discard(root))


def remove_own_copies(lock_wait_s: float = 1.0) -> list[Path]:
    """Remove every copy this process still holds (exit, signal); returns what was removed. Never blocks on a lock
    for more than ``lock_wait_s``: after a signal the template lock may be held by a copy in flight, in a worker
    thread or in the interrupted main thread itself (the old SIGTERM deadlock); the copies go anyway."""
    roots = _locked_or_anyway(_live_lock, lock_wait_s, lambda: sorted(_live))
    _locked_or_anyway(_template_lock, lock_wait_s, _templates.clear)
    for root in roots:
        _rmtree(root)
        release_copy(root, lock_wait_s)
    # a copy in flight in a worker thread holds the template lock and may have written into a root just removed:
    # it stops at its next file (copy_tree), or its git commit ends, then the lock is free; what it left is removed
    if _template_lock.acquire(timeout=2 * lock_wait_s):
        _template_lock.release()
    for root in roots:
        if os.path.lexists(root):
            _rmtree(root)
    return roots


def _locked_or_anyway(lock: threading.Lock, wait_s: float, action: Callable[[], _T]) -> _T:
    """``action()`` under ``lock`` if it can be had within ``wait_s``, else without it (exit paths only)."""
    if lock.acquire(timeout=wait_s):
        try:
            return action()
        finally:
            lock.release()
    for _ in range(3):  # a set / dict changed by another thread while read: read it again
        try:
            return action()
        except RuntimeError:
            continue
    return action()


def track_command(pgid: int) -> None:
    """Remember the process group of a command running in a local sandbox (a test run can take minutes)."""
    with _live_lock:
        _groups.add(pgid)


def release_command(pgid: int) -> None:
    with _live_lock:
        _groups.discard(pgid)


def kill_own_commands(lock_wait_s: float = 1.0) -> list[int]:
    """SIGKILL the process groups of commands still running in this process's local sandboxes (exit, signal):
    they run in their own session, so a signal to this process does not reach them."""
    groups = _locked_or_anyway(_live_lock, lock_wait_s, lambda: sorted(_groups))
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return groups


@dataclass
class LocalReapResult:
    removed: list[str] = field(default_factory=list)
    kept: int = 0


def reap_local_copies(base: str | Path | None = None, run_id: str | None = None,
                      dry_run: bool = False) -> LocalReapResult:
    """Remove local sandbox copies under ``base`` (default: the temp dir) whose owner process on this host is
    dead, or every copy of ``run_id``. Copies without a readable owner file are not ours: kept."""
    result = LocalReapResult()
    root = Path(base or tempfile.gettempdir())
    for path in sorted(root.glob(f"{COPY_PREFIX}*")):
        owner = path / OWNER_FILE
        try:
            labels = json.loads(owner.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(labels, dict) or LABEL_TASK not in labels:
            continue
        if not ((run_id is not None and labels.get(LABEL_RUN) == run_id) or owner_is_dead(labels)):
            result.kept += 1
            continue
        if not dry_run:
            shutil.rmtree(path, ignore_errors=True)
        result.removed.append(str(path))
    return result
