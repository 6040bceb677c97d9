"""The bubblewrap wrapper must still show the task its Python when the venv (or the whole checkout) lives under
/tmp, as a CI clone often does: the sandbox's empty /tmp must not hide it (seen: every local test run exited 127)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from graph_planner.sandbox import isolation


@pytest.mark.skipif(not isolation.bwrap_works(), reason="bubblewrap is not usable on this machine")
def test_interpreter_under_tmp_is_visible_inside_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="gp-venv-") as venv, \
            tempfile.TemporaryDirectory(dir="/tmp", prefix="gp-repo-") as repo:
        tool = Path(venv) / "bin" / "tool"
        tool.parent.mkdir()
        tool.write_text("#!/bin/sh\necho from-the-venv\n")
        tool.chmod(0o755)
        (Path("/tmp") / "gp-host-secret").write_text("host /tmp must stay hidden")
        monkeypatch.setattr(isolation, "interpreter_dirs", lambda: [venv])
        argv = isolation.bwrap_argv(Path(repo), network=False)
        ran = subprocess.run([*argv, str(tool)], capture_output=True, text=True, cwd=repo, timeout=30)
        assert ran.returncode == 0 and ran.stdout.strip() == "from-the-venv", ran.stderr
        hidden = subprocess.run([*argv, "cat", "/tmp/gp-host-secret"], capture_output=True, text=True, cwd=repo,
                                timeout=30)
        assert hidden.returncode != 0  # the rest of the host's /tmp is still not there
        (Path("/tmp") / "gp-host-secret").unlink()
