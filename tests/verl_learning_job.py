"""The verl learning run of tests/test_training_verl_learning.py, started in the background when collection ends
(tests/conftest.py, tests/background.py): ``benchmarks/env_learning.py --backend verl`` on seed 0 with 10 steps,
the same measuring function (graph_planner/training/learning_curve.py) the benchmark reports.

The run is SFT then a Ray job: minutes, much of it single-process imports, Ray start-up and sandboxed test runs,
which leave a core idle beside a sequential suite. Its result does not depend on the load (per-episode seeds,
lockstep rounds), so running beside the suite changes its time, not its curve.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from background import BackgroundCommand

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = "verl_learning"  # the fixture of test_training_verl_learning.py that needs the run
MODULE = "test_training_verl_learning.py"
STEPS, WINDOW = 10, 5
TIMEOUT_S = 1800


def start(workdir: Path) -> BackgroundCommand:
    """The benchmark's verl run of seed 0, started now; its stdout is the benchmark's JSON."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "env_learning.py"), "--backend", "verl", "--seeds", "0",
           "--steps", str(STEPS), "--window", str(WINDOW), "--out-dir", str(workdir / "bench")]
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "VERL_PLATFORM")}
    return BackgroundCommand("verl_learning", cmd, workdir, TIMEOUT_S, cwd=ROOT, env=env)


def attach(workdir: Path) -> BackgroundCommand:
    """The run another process (the pytest-xdist controller) started under ``workdir``."""
    return BackgroundCommand("verl_learning", [], workdir, TIMEOUT_S, start=False)


def can_start() -> bool:
    return True


# The background-run interface of tests/conftest.py (BACKGROUND_JOBS).
STASH = pytest.StashKey[BackgroundCommand]()  # where tests/conftest.py keeps the one it started
