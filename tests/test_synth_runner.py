"""The pytest fork server synthesis validates candidates with (synth/runner.py), in real local sandboxes: it gives
the graded run's statuses for the same tree, sees the tree as it is on disk at every run, reports what a run left
in the tree, and a run past its timeout is killed and the next run still works."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from graph_planner.config.schema import SandboxConfig
from graph_planner.sandbox.local import LocalSandbox
from graph_planner.synth.runner import ForkRunner
from graph_planner.synth.validate import clean_task


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


REPO = {
    "calc/__init__.py": "",
    "calc/ops.py": "def add(a, b):\n    return a + b\n",
    "tests/test_ops.py": (
        "import os, pytest\nfrom calc.ops import add\n\n"
        "def test_add():\n    assert add(1, 2) == 3\n\n"
        "def test_add_neg():\n    assert add(-1, -2) == -3\n\n"
        "@pytest.mark.skip(reason='never')\ndef test_skipped():\n    pass\n\n"
        "@pytest.mark.xfail\ndef test_xfail():\n    assert add(1, 1) == 3\n\n"
        "def test_writes():\n    open('left_behind.txt', 'w').write('x')\n"),
}


def test_fork_runs_agree_with_the_graded_run_and_see_each_edit(tmp_path):
    repo = _write(tmp_path / "calc", REPO)
    with LocalSandbox(clean_task(repo, "calc"), SandboxConfig(), None, "test-fork") as box:
        snap = box.snapshot()
        graded = box.run_tests()
        with ForkRunner(box) as runner:
            clean = runner.run(60)
            assert clean.statuses == graded.statuses and clean.statuses["tests/test_ops.py::test_add"] == "PASSED"
            assert runner.changed == ["?? left_behind.txt"]  # what the run wrote into the tree is reported
            box.restore(snap)
            box.write_file("calc/ops.py", "def add(a, b):\n    return a - b\n")
            mutated = runner.run(60)  # the fork imports calc.ops afresh: the edit is seen
            assert mutated.statuses["tests/test_ops.py::test_add"] == "FAILED"
            assert "assert -1 == 3" in mutated.log_tail
            assert mutated.statuses == box.run_tests().statuses
            box.write_file("calc/ops.py", REPO["calc/ops.py"])
            assert runner.run(60).statuses == graded.statuses


def test_a_run_past_its_timeout_is_killed_and_the_next_run_works(tmp_path):
    repo = _write(tmp_path / "calc", {**REPO, "tests/test_ops.py": (
        "import os, time\nfrom calc.ops import add\n\n"
        "def test_add():\n    assert add(1, 2) == 3\n\n"
        "def test_slow():\n    if os.path.exists('slow'):\n        time.sleep(600)\n")})
    with LocalSandbox(clean_task(repo, "calc"), SandboxConfig(), None, "test-fork") as box, \
            ForkRunner(box) as runner:
        box.write_file("slow", "")
        start = time.monotonic()
        stuck = runner.run(3)
        assert stuck.timed_out and time.monotonic() - start < 30
        box.exec("rm slow")
        again = runner.run(60)
        assert not again.timed_out and again.statuses == {"tests/test_ops.py::test_add": "PASSED",
                                                          "tests/test_ops.py::test_slow": "PASSED"}


def test_a_server_started_from_a_pool_thread_outlives_the_thread(tmp_path):
    """bubblewrap's --die-with-parent follows the thread that started the server: a server first used from a
    worker thread must keep answering after that thread ends (the clean runs use two threads, then the trace)."""
    repo = _write(tmp_path / "calc", REPO)
    with LocalSandbox(clean_task(repo, "calc"), SandboxConfig(), None, "test-fork") as box, \
            ForkRunner(box) as runner:
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(runner.run, 60).result().statuses
        pid = runner.pid
        time.sleep(1)
        assert runner.pid == pid is not None
        executed = runner.executed_lines(60)
        assert runner.pid == pid and executed is not None and 2 in executed["calc/ops.py"]


def test_a_test_printing_in_a_loop_leaves_a_bounded_log(tmp_path):
    """The fork server keeps the head and tail of a run's output (output_cap) and writes only that to its log: the
    statuses still come from pytest's summary at the end, and the next run works."""
    from graph_planner.grading.graded_command import HEAD_BYTES, TAIL_BYTES

    repo = _write(tmp_path / "calc", {**REPO, "tests/test_ops.py": (
        "import os\nfrom calc.ops import add\n\n"
        "def test_add():\n    assert add(1, 2) == 3\n\n"
        "def test_loud():\n    if os.path.exists('loud'):\n"
        "        for _ in range(20):\n            os.write(1, b'x' * 1048576)\n")})
    with LocalSandbox(clean_task(repo, "calc"), SandboxConfig(), None, "test-fork") as box, \
            ForkRunner(box) as runner:
        box.write_file("loud", "")
        loud = runner.run(120)
        size = runner._log.stat().st_size
        log = runner._log.read_bytes()
        assert size <= HEAD_BYTES + TAIL_BYTES + 100 and b" bytes of output dropped ...]\n" in log, size
        assert log.startswith(b"=") and log.rstrip().endswith(b"=")  # pytest's first and last lines are kept
        assert not loud.timed_out and loud.statuses == {"tests/test_ops.py::test_add": "PASSED",
                                                        "tests/test_ops.py::test_loud": "PASSED"}
        box.exec("rm loud")
        quiet = runner.run(60)
        assert quiet.statuses == loud.statuses and b"dropped" not in runner._log.read_bytes()
