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
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(sys.prefix)
FIXTURE = "demo_runs"  # the fixture of test_fresh_clone.py that needs the demo
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
    """``make demo`` started now on a fresh copy under ``workdir``; :meth:`result` waits for it."""

    def __init__(self, workdir: Path) -> None:
        self.clone = fresh_copy(workdir / "clone")
        if (self.clone / ".cache").exists() or (self.clone / "runs").exists():
            raise RuntimeError(f"{self.clone}: a fresh copy holds .cache/ or runs/ (they must be git-ignored)")
        self._out, self._err = workdir / "demo.stdout", workdir / "demo.stderr"
        cmd, env = _demo_command()
        with self._out.open("w") as out, self._err.open("w") as err:
            # its own process group: stop() ends make, the demo and its Prefect server together
            self.proc = subprocess.Popen(cmd, cwd=self.clone, env=env, stdout=out, stderr=err,
                                         start_new_session=True)

    def result(self) -> subprocess.CompletedProcess[str]:
        try:
            rc = self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        return subprocess.CompletedProcess(self.proc.args, rc, self._out.read_text(), self._err.read_text())

    def stop(self) -> None:
        """End the demo if it still runs (the session ended without the test, or was interrupted)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


BACKGROUND_DEMO = pytest.StashKey[BackgroundDemo]()  # where tests/conftest.py keeps the one it started
