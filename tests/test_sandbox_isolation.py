"""The bubblewrap wrapper must still show the task its Python when the venv (or the whole checkout) lives under
/tmp, as a CI clone often does: the sandbox's empty /tmp must not hide it (seen: every local test run exited 127)."""

from __future__ import annotations

import subprocess
import sys
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


@pytest.mark.skipif(not isolation.bwrap_works(), reason="bubblewrap is not usable on this machine")
@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs to run from a venv")
def test_a_symlinked_venv_still_gives_the_task_its_python(tmp_path: Path) -> None:
    """A venv reached through a symlink (a clone sharing a venv, a CI cache) is bound at its real path, so the
    task's PATH must name that path too (seen: `python: command not found`, every test run untrusted)."""
    link = tmp_path / "venv-link"
    link.symlink_to(Path(sys.prefix).resolve())
    script = ("import sys; from graph_planner.env.samples import sample_task; from graph_planner.config.schema "
              "import RunConfig; from graph_planner.sandbox.factory import make_sandbox\n"
              "with make_sandbox(sample_task('graphplanner-samples__textkit-7'), RunConfig(), None, 'link') as box:\n"
              "    res = box.exec('python -c \"print(6 * 7)\"')\n"
              "    print(res.output.strip())")
    ran = subprocess.run([str(link / "bin" / "python"), "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    assert ran.returncode == 0 and ran.stdout.strip().splitlines()[-1] == "42", ran.stdout + ran.stderr
