"""One run at a time per run directory: two `gp eval` on the same run name would both see the same unfinished
tasks and run (and append) every one of them twice, and two `gp train` would mix checkpoints. An exclusive `flock`
on `<dir>/.lock`, held for the whole run, makes the second one stop at once (exit 4) with a message naming the
holder, before it writes anything; the kernel drops the lock when the holder dies, so a killed run never leaves a
stale lock behind. The lock is re-entrant within a process (the CLI takes it before writing the run's config, the
library function it then calls takes it again)."""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".lock"
_HELD: dict[Path, int] = {}  # lock dir -> depth, for the locks this process holds
_HELD_GUARD = threading.Lock()


class RunLockedError(RuntimeError):
    """Another process holds the run directory."""


def _holder(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip() or "another process"
    except OSError:
        return "another process"


def refuse_if_locked(run_dir: Path) -> None:
    """Raise :class:`RunLockedError` when another process holds ``<run_dir>/.lock`` (a probe that creates and
    writes nothing: a live run is named as such before any other check looks at its half-written files)."""
    key = Path(run_dir).absolute()
    path = key / LOCK_FILE
    with _HELD_GUARD:
        if key in _HELD:
            return
    try:
        probe = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError:
        return  # no lock file: nobody holds it
    try:
        fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RunLockedError(f"run directory {run_dir} is in use by {_holder(path)}; wait for that run to "
                             "finish, or use another --run-name") from None
    finally:
        probe.close()


@contextmanager
def run_lock(run_dir: Path) -> Iterator[Path]:
    """Hold ``<run_dir>/.lock`` (raises :class:`RunLockedError` at once when another process holds it; a refused
    run leaves the file untouched: it is opened for appending, and written only once the lock is ours)."""
    key = Path(run_dir).absolute()
    path = key / LOCK_FILE
    with _HELD_GUARD:
        if key in _HELD:
            _HELD[key] += 1
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield path
        finally:
            with _HELD_GUARD:
                _HELD[key] -= 1
        return
    key.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+b", buffering=0)  # noqa: SIM115 - held for the whole run; unbuffered: close never writes
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLockedError(f"run directory {run_dir} is in use by {_holder(path)}; wait for that run to "
                                 "finish, or use another --run-name") from None
        try:  # who holds it, for the message of a refused run; the flock is the lock, so a full disk is no matter
            os.ftruncate(handle.fileno(), 0)
            os.write(handle.fileno(), f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        except OSError:
            pass
        with _HELD_GUARD:
            _HELD[key] = 1
        try:
            yield path
        finally:
            with _HELD_GUARD:
                _HELD.pop(key, None)
    finally:
        handle.close()
