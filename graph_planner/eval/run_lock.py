"""One run at a time per run directory: two `gp eval` on the same run name would both see the same unfinished
tasks and run (and append) every one of them twice. An exclusive `flock` on `<run dir>/.lock`, held for the whole
run, makes the second one stop at once with a message naming the holder; the kernel drops the lock when the
holder dies, so a killed run never leaves a stale lock behind."""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".lock"


class RunLockedError(RuntimeError):
    """Another process holds the run directory."""


@contextmanager
def run_lock(run_dir: Path) -> Iterator[Path]:
    path = Path(run_dir) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the whole run
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise RunLockedError(f"run directory {run_dir} is in use by {holder}; wait for that run to finish, or "
                                 "use another --run-name") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        yield path
    finally:
        handle.close()
