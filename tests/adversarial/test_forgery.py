"""Forgeries from inside the test process (issue 23) on the LOCAL backend: each is first shown to be real (a plain
`pytest -rA` + swebench's parser + the SWE-bench rule grade the bug-present tree resolved), then graded by the
project's grader: tampered, never resolved. No false alarms: the real fix, and an honest patch that breaks
collection, are not tampered. The docker side is in test_docker_attacks.py."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from attack_repo import TEST_ADD, TEST_OPS, AttackRepo, attack_fixture, local_config
from forgeries import (
    BREAKS_COLLECTION,
    CALC_INIT,
    EXIT_LINES,
    FORGERIES,
    RUNNER_REPLACED,
    RUNTEST_REPLACED,
)

from graph_planner.grading.parse import parse_test_log
from graph_planner.grading.swebench_grade import grade_fail_to_pass
from graph_planner.sandbox.local import LocalSandbox
from graph_planner.validation.grade import grade_patch

attack = attack_fixture()


def _plain_grade(attack: AttackRepo, tmp_path, patch: str) -> bool:
    """What a grader without canaries, integrity checks or a second record decides."""
    task = attack.task()
    run = attack.plain_pytest(tmp_path / "plain", patch, task.test_files)
    return grade_fail_to_pass(parse_test_log(run.stdout), task.fail_to_pass, task.pass_to_pass)[0]


@pytest.mark.parametrize("name", list(FORGERIES))
def test_the_forgery_is_real_when_nothing_detects_it(attack, tmp_path, name):
    assert _plain_grade(attack, tmp_path, attack.patch(FORGERIES[name].files)), name


@pytest.mark.parametrize("name", list(FORGERIES))
def test_forgery_is_graded_tampered(attack, name):
    grade = grade_patch(attack.task(), attack.patch(FORGERIES[name].files), local_config(), attack.root,
                        backend="local")
    assert grade.status == "tampered" and not grade.resolved, grade
    assert grade.tamper_evidence
    assert not any("::" in e for e in grade.tamper_evidence if "canary" in e)  # by role, never by name


@pytest.mark.parametrize("code", [RUNTEST_REPLACED, EXIT_LINES], ids=["runtest replaced", "exit-time lines"])
def test_forgery_on_top_of_the_real_fix_is_still_tampered(attack, code):
    patch = attack.patch({"calc/__init__.py": CALC_INIT + code}, with_gold=True)
    grade = grade_patch(attack.task(), patch, local_config(), attack.root, backend="local")
    assert grade.status == "tampered", grade


def test_real_fix_is_resolved_with_canaries_and_leaves_no_trace(attack):
    with LocalSandbox(attack.task(), local_config().sandbox, attack.root, f"fx-{uuid.uuid4().hex[:6]}") as sb:
        sb.apply_patch(attack.gold)
        before, entries = sb.diff(), sorted(p.name for p in sb.repo_dir.parent.iterdir())
        report = sb.run_tests()
        assert report.resolved and not report.tampered and report.rc == 0, report
        assert set(report.statuses) == {"tests/test_add.py::test_add", "tests/test_ops.py::test_sub",
                                        "tests/test_ops.py::test_sub_zero"}
        assert "3 passed" in report.log_tail and "failed" not in report.log_tail, report.log_tail
        assert sb.diff() == before  # the canaries went with the tree restore
        assert sorted(p.name for p in sb.repo_dir.parent.iterdir()) == entries  # and the recorder's dir is gone


def test_runner_replaced_on_an_r2e_row_is_tampered(attack):
    task = attack.task(source="r2e_gym", test_patch=None, fail_to_pass=[], pass_to_pass=[],
                       test_files=["r2e_tests"], hidden_tests={"test_1.py": TEST_ADD, "test_2.py": TEST_OPS},
                       expected_output={"test_add": "PASSED", "test_sub": "PASSED"})
    assert grade_patch(task, attack.gold, local_config(), attack.root, backend="local").status == "resolved"
    forged = attack.patch({"calc/__init__.py": CALC_INIT + RUNNER_REPLACED})
    grade = grade_patch(task, forged, local_config(), attack.root, backend="local")
    assert grade.status == "tampered", grade


def test_an_honest_patch_that_breaks_collection_is_unresolved_not_tampered(attack):
    grade = grade_patch(attack.task(), attack.patch(BREAKS_COLLECTION.files), local_config(), attack.root,
                        backend="local")
    assert grade.status == "unresolved" and not grade.tamper_evidence, grade


_GRADE_IN_CHILD = """
import sys
sys.path[:0] = sys.argv[1:3]
from pathlib import Path
from attack_repo import AttackRepo, local_config
from forgeries import HUGE_OUTPUT
from graph_planner.validation.grade import grade_patch
attack = AttackRepo(Path(sys.argv[3]))
grade = grade_patch(attack.task(), attack.patch(HUGE_OUTPUT.files), local_config(), attack.root, backend="local")
print(grade.status, grade.truncated, grade.output_bytes, bool(grade.tamper_evidence),
      next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) // 1024)
"""


@pytest.mark.slow
def test_300_mb_printed_at_exit_is_cut_unresolved_and_the_grader_stays_small(tmp_path):
    """The output streams through head/tail in the sandbox: the grading process's peak RSS stays far below the
    300 MB the test run printed (a grader that kept the output would hold it, plus its decoded copy). The peak is
    the child's own VmHWM: getrusage's ru_maxrss survives execve, so inside the full suite it reported the pytest
    parent's 639 MB."""
    here = str(Path(__file__).parent)
    run = subprocess.run([sys.executable, "-c", _GRADE_IN_CHILD, here, str(Path(here).parent), str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    status, truncated, output_bytes, tampered, peak_mb = run.stdout.split()[-5:]
    assert status == "unresolved" and truncated == "True" and tampered == "False", run.stdout
    assert int(output_bytes) > 300 * (1 << 20)
    assert int(peak_mb) < 300, f"the grader peaked at {peak_mb} MB"  # measured 218 MB; the output alone is 300
