"""``make demo`` on a fresh copy of the checkout, for tests/test_fresh_clone.py.

The demo is the learning run (minutes on 2 cores) and mostly waits on sandboxed test runs, so when a selected
test needs it, the suite starts it in the background as soon as collection ends (tests/conftest.py) and the
fixture collects the result: the rest of the suite runs meanwhile instead of after it.

The clone is a copy of the checkout's tracked and untracked-but-not-ignored files (what ``git clone`` of this
commit plus the working changes would hold), run with the suite's own venv: installing a second venv would test
the lock, not the demo, and ``benchmarks/install.py`` measures that.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(sys.prefix)
FIXTURE = "demo_runs"  # the fixture of test_fresh_clone.py that needs the demo
MODULE = "test_fresh_clone.py"  # where that fixture lives (the xdist controller sees node ids only)
TIMEOUT_S = 900


def venv_installed() -> bool:
    return (VENV / ".installed").exists()


def fresh_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree, not yet committed
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel, follow_symlinks=False)
    return dest


def _demo_command() -> tuple[list[str], dict[str, str]]:
    # Prefect settings of the outer test session must not leak in: the demo runs its own ephemeral server.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "HF_HUB_OFFLINE"))}
    # -o STAMP: the venv is installed already; don't let the copy's newer pyproject.toml re-point it.
    return ["make", "-s", "-o", str(VENV / ".installed"), "demo", f"VENV={VENV}"], env


def make_demo(clone: Path) -> subprocess.CompletedProcess[str]:
    """``make demo`` in ``clone``, waited for."""
    cmd, env = _demo_command()
    return subprocess.run(cmd, cwd=clone, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


class BackgroundDemo:
    """``make demo`` started now on a fresh copy under ``workdir``; :meth:`result` waits for it.

    Its exit status lands in ``workdir/demo.rc`` when it ends, so a process that did not start it (a pytest-xdist
    worker, when the controller started it) can :meth:`attach` to the same run and wait for it there."""

    def __init__(self, workdir: Path, *, start: bool = True) -> None:
        self.clone = workdir / "clone"
        self._out, self._err, self._rc = workdir / "demo.stdout", workdir / "demo.stderr", workdir / "demo.rc"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = time.monotonic()
        if not start:
            return
        fresh_copy(self.clone)
        if (self.clone / ".cache").exists() or (self.clone / "runs").exists():
            raise RuntimeError(f"{self.clone}: a fresh copy holds .cache/ or runs/ (they must be git-ignored)")
        cmd, env = _demo_command()
        part = self._rc.with_suffix(".part")
        record = f'"$@"; echo $? > {shlex.quote(str(part))} && mv {shlex.quote(str(part))} {shlex.quote(str(self._rc))}'
        with self._out.open("w") as out, self._err.open("w") as err:
            # its own process group: stop() ends make, the demo and its Prefect server together
            self.proc = subprocess.Popen(["sh", "-c", record, "sh", *cmd], cwd=self.clone, env=env, stdout=out,
                                         stderr=err, start_new_session=True)

    @classmethod
    def attach(cls, workdir: Path) -> BackgroundDemo:
        """The demo another process started under ``workdir`` (it is stopped by that process, not by this one)."""
        return cls(workdir, start=False)

    def result(self) -> subprocess.CompletedProcess[str]:
        deadline = self.started + TIMEOUT_S
        while not self._rc.exists():
            if self.proc is not None and self.proc.poll() is not None and not self._rc.exists():
                break  # ended without writing its status: stopped by a signal
            if time.monotonic() > deadline:
                self.stop()
                raise subprocess.TimeoutExpired(_demo_command()[0], TIMEOUT_S)
            time.sleep(1)
        rc = int(self._rc.read_text()) if self._rc.exists() else -1
        return subprocess.CompletedProcess(_demo_command()[0], rc, self._out.read_text(), self._err.read_text())

    def stop(self) -> None:
        """End the demo if it still runs (the session ended without the test, or was interrupted)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


BACKGROUND_DEMO = pytest.StashKey[BackgroundDemo]()  # where tests/conftest.py keeps the one it started
#: The pytest-xdist ``workerinput`` key naming the controller's demo dir (tests/conftest.py).
WORKER_INPUT = "fresh_clone_demo_dir"
