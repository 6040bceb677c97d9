"""A long command the suite starts in the background when collection ends (tests/conftest.py), so the rest of the
suite runs beside it; the test that needs it collects its result at the end (those tests are sorted last).

Used by the fresh-clone ``make demo`` (tests/fresh_clone_demo.py) and the verl learning run
(tests/verl_learning_job.py): each mostly waits on sandboxed test runs, Ray start-up and single-process imports,
which leave a core idle in a sequential suite.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path


class BackgroundCommand:
    """``cmd`` started now in its own session; :meth:`result` waits for it (at most ``timeout_s`` from the start).

    Its output goes to ``workdir/<name>.stdout`` / ``.stderr`` and its exit status to ``workdir/<name>.rc`` when it
    ends, so a process that did not start it (a pytest-xdist worker, when the controller started it) can
    :meth:`attach` to the same run and wait for it there."""

    def __init__(self, name: str, cmd: list[str], workdir: Path, timeout_s: float, *, cwd: Path | None = None,
                 env: dict[str, str] | None = None, start: bool = True) -> None:
        self.cmd, self.timeout_s = cmd, timeout_s
        self._out, self._err = workdir / f"{name}.stdout", workdir / f"{name}.stderr"
        self._rc = workdir / f"{name}.rc"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = time.monotonic()
        if not start:
            return
        part = self._rc.with_suffix(".part")
        record = f'"$@"; echo $? > {shlex.quote(str(part))} && mv {shlex.quote(str(part))} {shlex.quote(str(self._rc))}'
        with self._out.open("w") as out, self._err.open("w") as err:
            # its own process group: stop() ends the command and everything it started together
            self.proc = subprocess.Popen(["sh", "-c", record, "sh", *cmd], cwd=cwd, env=env, stdout=out, stderr=err,
                                         start_new_session=True)

    def result(self) -> subprocess.CompletedProcess[str]:
        deadline = self.started + self.timeout_s
        while not self._rc.exists():
            if self.proc is not None and self.proc.poll() is not None and not self._rc.exists():
                break  # ended without writing its status: stopped by a signal
            if time.monotonic() > deadline:
                self.stop()
                raise subprocess.TimeoutExpired(self.cmd, self.timeout_s)
            time.sleep(1)
        rc = int(self._rc.read_text()) if self._rc.exists() else -1
        return subprocess.CompletedProcess(self.cmd, rc, self._out.read_text(), self._err.read_text())

    def stop(self) -> None:
        """End the command if it still runs (the session ended without its test, or was interrupted)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
