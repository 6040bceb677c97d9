"""A newcomer's first command on a fresh clone is ``make demo``: it must work before anything (``make test``,
``docker-up.sh``, an earlier demo) has created ``.cache/`` or any other state.

The clone is a copy of the checkout's tracked and untracked-but-not-ignored files (what ``git clone`` of this
commit plus the working changes would hold), run with the suite's own venv: installing a second venv would test
the lock, not the demo, and ``benchmarks/install.py`` measures that.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(sys.prefix)


def _fresh_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree, not yet committed
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel, follow_symlinks=False)
    return dest


def _make_demo(clone: Path) -> subprocess.CompletedProcess[str]:
    # Prefect settings of the outer test session must not leak in: the demo runs its own ephemeral server.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "HF_HUB_OFFLINE"))}
    stamp = VENV / ".installed"
    # -o STAMP: the venv is installed already; don't let the copy's newer pyproject.toml re-point it.
    return subprocess.run(["make", "-s", "-o", str(stamp), "demo", f"VENV={VENV}"], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_make_demo_is_a_working_first_command_on_a_fresh_clone(tmp_path: Path) -> None:
    if not (VENV / ".installed").exists():
        pytest.skip(f"the suite is not running from a Makefile venv ({VENV}/.installed missing)")
    clone = _fresh_copy(tmp_path / "clone")
    assert not (clone / ".cache").exists() and not (clone / "runs").exists()

    first = _make_demo(clone)
    assert first.returncode == 0, f"make demo failed on a fresh clone:\n{first.stdout[-4000:]}\n{first.stderr[-4000:]}"
    report = re.search(r"^report: (.+)$", first.stdout, re.M)
    assert report, first.stdout
    report_path = Path(report.group(1).strip())
    assert report_path.is_file() and report_path.is_relative_to(clone)
    assert "# " in report_path.read_text()
    ran = re.search(r"^steps: (\d+) step\(s\) ran, (\d+) cached", first.stdout, re.M)
    assert ran and int(ran.group(1)) > 0, first.stdout

    # The second run is what a newcomer sees next: nothing re-executed, everything from the cache.
    second = _make_demo(clone)
    assert second.returncode == 0, second.stderr[-4000:]
    again = re.search(r"^steps: (\d+) step\(s\) ran, (\d+) cached", second.stdout, re.M)
    assert again and int(again.group(1)) == 0 and int(again.group(2)) == int(ran.group(1)), second.stdout
