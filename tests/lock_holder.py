"""Another process holding a run directory's lock, as a live `gp train` / `gp eval` does (the lock is re-entrant
within one process, so a test cannot play the other run from its own process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from graph_planner.config.run_lock import run_lock
    with run_lock(Path(sys.argv[1])):
        print("held", flush=True)
        sys.stdin.read()  # until the test closes our stdin
""")


@contextmanager
def lock_held_elsewhere(lock_dir: Path, timeout: float = 60.0) -> Iterator[int]:
    """Hold ``<lock_dir>/.lock`` in a child process; yields its pid."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock_dir)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.strip() == "held" and time.monotonic() < deadline, f"lock holder did not start: {line!r}"
        yield proc.pid
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=30)
