"""run_tests on the local backend: hidden tests installed only while grading, real pytest runs graded by the
SWE-bench and R2E rules, the agent's tree always restored afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_sandbox_local_fixtures import local_config, make_calc_repo, r2e_task, swebench_task, tree_hashes

from graph_planner.sandbox.local import LocalSandbox

BREAK_SUB = "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -5,2 +5,2 @@\n def sub(a, b):\n-    return a - b\n+    return b\n"


@pytest.fixture()
def calc(tmp_path: Path) -> tuple[Path, str, str]:
    return make_calc_repo(tmp_path)


def test_swebench_task_unresolved_before_and_resolved_after_the_gold_patch(tmp_path, calc):
    _, gold, test_patch = calc
    with LocalSandbox(swebench_task(tmp_path, gold, test_patch), local_config().sandbox, tmp_path, "t") as sb:
        empty = sb.run_tests()
        assert empty.mode == "swebench" and not empty.resolved and empty.error is None
        assert empty.statuses["tests/test_add.py::test_add"] == "FAILED"
        assert empty.fail_to_pass["failure"] == ["tests/test_add.py::test_add"]
        assert empty.pass_to_pass["failure"] == []
        sb.apply_patch(gold)
        report = sb.run_tests()
        assert report.resolved and report.rc == 0
        assert report.statuses == {"tests/test_add.py::test_add": "PASSED", "tests/test_ops.py::test_sub": "PASSED",
                                   "tests/test_ops.py::test_sub_zero": "PASSED"}


def test_fix_that_breaks_a_pass_to_pass_test_is_not_resolved(tmp_path, calc):
    _, gold, test_patch = calc
    with LocalSandbox(swebench_task(tmp_path, gold, test_patch), local_config().sandbox, tmp_path, "t") as sb:
        sb.apply_patch(gold)
        sb.apply_patch(BREAK_SUB)
        report = sb.run_tests()
        assert not report.resolved
        assert report.fail_to_pass["failure"] == []
        assert "tests/test_ops.py::test_sub" in report.pass_to_pass["failure"]


def test_run_tests_restores_the_agents_tree_exactly(tmp_path, calc):
    _, gold, test_patch = calc
    with LocalSandbox(swebench_task(tmp_path, gold, test_patch), local_config().sandbox, tmp_path, "t") as sb:
        sb.apply_patch(gold)
        sb.write_file("scratch/repro.py", "print('repro')\n")
        sb.write_file("tests/test_ops.py", "# agent rewrote this test file\n")
        diff_before, files_before = sb.diff(), tree_hashes(sb.repo_dir)
        report = sb.run_tests()
        # the harness resets test_patch files to base before applying it, so the agent's edit cannot break grading
        assert report.resolved
        assert sb.diff() == diff_before
        assert tree_hashes(sb.repo_dir) == files_before


def test_r2e_task_graded_by_expected_output_equality(tmp_path, calc):
    _, gold, _ = calc
    task = r2e_task(tmp_path, gold)
    with LocalSandbox(task, local_config().sandbox, tmp_path, "t") as sb:
        empty = sb.run_tests()
        assert empty.mode == "r2e" and not empty.resolved
        assert empty.statuses["r2e_tests/test_1.py::TestCalc::test_add"] == "FAILED"
        sb.apply_patch(gold)
        assert sb.run_tests().resolved
    # the expected map says test_sub must FAIL: a run where it passes is not the expected output
    strict = r2e_task(tmp_path, gold, expected_output={"TestCalc.test_add": "PASSED", "TestCalc.test_sub": "FAILED"})
    with LocalSandbox(strict, local_config().sandbox, tmp_path, "t") as sb:
        sb.apply_patch(gold)
        assert not sb.run_tests().resolved


def test_selectors_run_only_the_chosen_tests_against_the_agents_tree(tmp_path, calc):
    _, gold, test_patch = calc
    with LocalSandbox(swebench_task(tmp_path, gold, test_patch), local_config().sandbox, tmp_path, "t") as sb:
        report = sb.run_tests(["tests/test_ops.py::test_sub"])
        assert report.mode == "selectors" and report.resolved
        assert report.statuses == {"tests/test_ops.py::test_sub": "PASSED"}
        assert not sb.run_tests(["tests/test_add.py"]).resolved


def test_test_run_past_its_timeout_is_reported_not_resolved(tmp_path, calc):
    _, gold, test_patch = calc
    task = swebench_task(tmp_path, gold, test_patch, test_cmd="sleep 30; python -m pytest -rA")
    with LocalSandbox(task, local_config(test_timeout=1).sandbox, tmp_path, "t") as sb:
        sb.apply_patch(gold)
        before = sb.diff()
        report = sb.run_tests()
        assert report.timed_out and not report.resolved and "timed out" in (report.error or "")
        assert sb.diff() == before


def test_nonzero_exit_without_failing_tests_is_not_trusted(tmp_path, calc):
    _, gold, test_patch = calc
    task = swebench_task(tmp_path, gold, test_patch,
                         test_cmd="sh -c 'python -m pytest -rA -p no:cacheprovider \"$@\"; exit 3' sh")
    with LocalSandbox(task, local_config().sandbox, tmp_path, "t") as sb:
        sb.apply_patch(gold)
        report = sb.run_tests()
        assert not report.resolved and "exited 3" in (report.error or "")


def test_test_patch_that_does_not_apply_is_an_error_not_a_grade(tmp_path, calc):
    _, gold, _ = calc
    broken = "--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n@@ -1,1 +1,1 @@\n-nothing here\n+x\n"
    with LocalSandbox(swebench_task(tmp_path, gold, broken), local_config().sandbox, tmp_path, "t") as sb:
        sb.apply_patch(gold)
        report = sb.run_tests()
        assert not report.resolved and "test_patch" in (report.error or "")
        assert "return a + b" in sb.read_file("calc/ops.py")


@pytest.mark.parametrize("head, tail", [(256, 512), (2048, 64), (300, 1500)])
def test_a_graded_reply_cut_by_the_sandbox_output_cap_is_an_error_not_a_grade(tmp_path, calc, monkeypatch,
                                                                                head, tail):
    """The exec cap (output_cap) leaves room for a graded reply, but a run can outgrow it (tens of thousands of
    tests make a record of megabytes). A reply cut in the middle may still parse, with a log missing lines or a
    record missing tests: it is never graded, whichever part the cut removed."""
    from graph_planner.sandbox import local as local_module
    from graph_planner.sandbox.output_cap import CappedOutput

    _, gold, test_patch = calc
    with LocalSandbox(swebench_task(tmp_path, gold, test_patch), local_config().sandbox, tmp_path, "t") as sb:
        sb.apply_patch(gold)
        assert sb.run_tests().resolved  # uncut, the same run resolves
        monkeypatch.setattr(local_module, "command_output", lambda: CappedOutput(head, tail))
        report = sb.run_tests()
    assert not report.resolved
    assert report.error is not None and "output cap" in report.error, report.error
