"""SIGTERM / SIGINT end a `gp` command within a bounded time, with exit 143 / 130, one line and no traceback.

Schedulers, Prefect cancellation, Kubernetes and Slurm stop jobs with SIGTERM. The handler does only what is safe
wherever the main thread was interrupted (it may hold any lock, e.g. the sandbox-copy lock): it records the signal,
wakes a watchdog through a pipe and raises :class:`Terminated` in the main thread. The main thread unwinds (``with``
blocks release their locks, worker pools are left without waiting, see :func:`leave_pool`), then the entry point
calls :func:`finish`, which runs the registered cleanups (sandbox copies, containers: none blocks on a lock) and
exits at once. The watchdog forces the same exit if that has not happened :data:`GRACE_S` seconds after the signal
(a C call that never returns to Python, an atexit hook that hangs).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import FrameType
from typing import NoReturn

log = logging.getLogger(__name__)

#: Seconds between the signal and the watchdog's forced exit.
GRACE_S = 10.0

Cleanup = Callable[[], None]


class Terminated(BaseException):
    """A SIGTERM / SIGINT reached the main thread (a BaseException: ``except Exception`` must not swallow it)."""

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        super().__init__(f"terminated by {signal_name(signum)}")

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.signum)


def exit_code_for(signum: int) -> int:
    """The shell's convention for a process ended by a signal: 128 + signal number (SIGTERM 143, SIGINT 130)."""
    return 128 + int(signum)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass
class _State:
    command: str = "gp"
    signum: int | None = None
    wake_w: int = -1
    installed: bool = False
    cleanups: list[Cleanup] = field(default_factory=list)
    grace_s: float = GRACE_S


_state = _State()


def installed() -> bool:
    """Whether :func:`install` put the handlers in place in this process."""
    return _state.installed


def install(command_name: str) -> bool:
    """Handle SIGTERM and SIGINT as described above for command ``command_name`` (named in the exit line).
    Main thread only (Python's rule for signal handlers); idempotent (a later call only renames the command).
    An *ignored* SIGINT stays ignored: a background job of a non-interactive shell must not die of the
    terminal's Ctrl-C. Returns whether the handlers are in place."""
    _state.command = command_name
    if _state.installed:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    read_fd, _state.wake_w = os.pipe()
    threading.Thread(target=_watchdog, args=(read_fd,), name="gp-termination-watchdog", daemon=True).start()
    signal.signal(signal.SIGTERM, _handler)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _handler)
    _state.installed = True
    return True


def register_cleanup(cleanup: Cleanup) -> None:
    """Run ``cleanup`` after a signal (once, after the unwind, or from the watchdog). It must not block on a lock
    (use ``acquire(timeout=...)``): a worker thread may hold it for as long as its episode runs."""
    if cleanup not in _state.cleanups:
        _state.cleanups.append(cleanup)


def _handler(signum: int, _frame: FrameType | None) -> None:
    if _state.signum is not None:
        return  # a second signal: the unwind / cleanup is under way and the watchdog bounds it
    _state.signum = signum
    os.write(_state.wake_w, b"x")  # no lock taken: the watchdog blocks on the pipe's other end
    raise Terminated(signum)


def extend_grace(seconds: float) -> None:
    """Give the exit after a signal at least ``seconds`` (stopping a Ray job and its head takes longer than
    :data:`GRACE_S`); called before the signal, for the stretch of work that needs it."""
    _state.grace_s = max(_state.grace_s, seconds)


def _watchdog(read_fd: int) -> None:
    os.read(read_fd, 1)
    start = time.monotonic()
    while (left := start + _state.grace_s - time.monotonic()) > 0:
        time.sleep(left)
    note = f"forced after {_state.grace_s:g}s"
    _say_and_exit(_state.signum or signal.SIGTERM, _run_cleanups(), note)


def _run_cleanups() -> list[str]:
    """Run every cleanup, each failure recorded (never raised: the exit must happen)."""
    failures = []
    for cleanup in list(_state.cleanups):
        try:
            cleanup()
        except Exception as exc:  # noqa: BLE001 - reported in the exit line
            failures.append(f"{type(exc).__name__}: {exc}")
    return failures


def _say_and_exit(signum: int, failures: list[str], note: str = "") -> NoReturn:
    status = "sandbox cleanup incomplete (run `gp sandbox reap`)" if failures else "sandboxes removed"
    details = "; ".join([*failures, note] if note else failures)
    line = f"{_state.command}: terminated by {signal_name(signum)}; {status}" + (f" ({details})" if details else "")
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    os._exit(exit_code_for(signum))


def finish(exc: Terminated) -> NoReturn:
    """The entry point's end after :class:`Terminated` unwound the main thread: cleanups, atexit hooks (logs
    flushed, a Ray connection closed), the one line, then exit without joining worker threads (an episode in
    flight is abandoned, its sandbox already removed)."""
    failures = _run_cleanups()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    failures += _run_cleanups()  # again: what a worker thread still made meanwhile
    _say_and_exit(exc.signum, failures)


def signalled() -> bool:
    """Whether a SIGTERM / SIGINT arrived (the process is on its way out)."""
    return _state.signum is not None


@contextlib.contextmanager
def leave_pool(pool: ThreadPoolExecutor) -> Iterator[ThreadPoolExecutor]:
    """Use ``pool`` like ``with pool:``, except that a signal (or Ctrl-C) leaves it at once: queued work is
    cancelled and episodes in flight are not waited for (their sandboxes are removed by the exit cleanup). An
    ordinary exception still waits for the work in flight, as ``with`` does."""
    try:
        yield pool
    except BaseException as exc:
        quit_now = isinstance(exc, (Terminated, KeyboardInterrupt)) or signalled()
        pool.shutdown(wait=not quit_now, cancel_futures=quit_now)
        raise
    pool.shutdown(wait=True)
