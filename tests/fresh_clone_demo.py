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
import subprocess
import sys
from pathlib import Path

import pytest
from background import BackgroundCommand

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


class BackgroundDemo(BackgroundCommand):
    """``make demo`` started now on a fresh copy under ``workdir`` (tests/background.py); :meth:`attach` joins one
    another process started there."""

    def __init__(self, workdir: Path, *, start: bool = True) -> None:
        self.clone = workdir / "clone"
        cmd, env = _demo_command()
        if start:
            fresh_copy(self.clone)
            if (self.clone / ".cache").exists() or (self.clone / "runs").exists():
                raise RuntimeError(f"{self.clone}: a fresh copy holds .cache/ or runs/ (they must be git-ignored)")
        super().__init__("demo", cmd, workdir, TIMEOUT_S, cwd=self.clone, env=env, start=start)

    @classmethod
    def attach(cls, workdir: Path) -> BackgroundDemo:
        """The demo another process started under ``workdir`` (it is stopped by that process, not by this one)."""
        return cls(workdir, start=False)


# The background-run interface of tests/conftest.py (BACKGROUND_JOBS).
STASH = pytest.StashKey[BackgroundDemo]()  # where tests/conftest.py keeps the one it started
start = BackgroundDemo
attach = BackgroundDemo.attach
can_start = venv_installed  # the demo runs on the suite's own Makefile venv
