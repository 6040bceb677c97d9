"""Grade one finished test command: parse its log with the task's swebench parser and apply the task's rule
(SWE-bench F2P/P2P, R2E expected outputs, or "every selected test passes"). Pure: no sandbox here.

``grade_checked_run`` grades the output of the checked command (graded_command.py): the canaries, the log's
integrity and pytest's own record are checked first, and a forged run is graded ``tampered``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_planner.episode.results import ExecResult, TestReport
from graph_planner.grading.canary import CanaryPlan, check_canaries, scrub
from graph_planner.grading.integrity import check_integrity
from graph_planner.grading.parse import parse_test_log
from graph_planner.grading.r2e_grade import grade_expected_output
from graph_planner.grading.recorder import compare_with_log, parse_record
from graph_planner.grading.swebench_grade import grade_fail_to_pass

if TYPE_CHECKING:
    from graph_planner.data.record import TaskRecord
    from graph_planner.grading.graded_command import GradedOutput

LOG_TAIL_CHARS = 4000
_PASSING = ("PASSED", "XFAIL")


def grade_test_run(task: TaskRecord, result: ExecResult, mode: str, seconds: float,
                   timeout: float | None = None) -> TestReport:
    """TestReport of ``result`` (the test command's run) graded by ``mode``: swebench | r2e | selectors."""
    log_text = result.output
    report = TestReport(resolved=False, mode=mode, rc=result.rc, seconds=seconds, timed_out=result.timed_out,
                        log_tail=log_text[-LOG_TAIL_CHARS:])
    try:
        report.statuses = parse_test_log(log_text, task.log_parser)
    except ValueError as exc:
        report.error = f"task {task.task_id}: {exc}"
        return report
    return _apply_rule(task, report, mode, timeout)


def _apply_rule(task: TaskRecord, report: TestReport, mode: str, timeout: float | None) -> TestReport:
    if report.timed_out:
        limit = f" after {timeout:g}s (sandbox.test_timeout)" if timeout else ""
        report.error = f"test command timed out{limit}"
        return report
    failing = any(s in ("FAILED", "ERROR") for s in report.statuses.values())
    if report.rc != 0 and not failing:
        # swebench 5 rule: a non-zero exit with no failing test means the log cannot be trusted
        report.error = (f"test command exited {report.rc} but no test FAILED/ERROR was parsed "
                        f"({len(report.statuses)} statuses); the run is not trusted")
        return report
    if mode == "swebench":
        report.resolved, report.fail_to_pass, report.pass_to_pass = grade_fail_to_pass(
            report.statuses, task.fail_to_pass, task.pass_to_pass)
    elif mode == "r2e":
        report.resolved = grade_expected_output(report.statuses, task.expected_output or {})
    else:
        report.resolved = bool(report.statuses) and all(s in _PASSING for s in report.statuses.values())
    return report


@dataclass
class Checks:
    """What the checked run carried: the canary plan (possibly empty), whether the recorder was loaded, and
    whether the command is one pytest run (so its exit status must be pytest's)."""

    plan: CanaryPlan
    recorder: bool
    single_pytest: bool


def grade_checked_run(task: TaskRecord, graded: GradedOutput, checks: Checks, mode: str, seconds: float,
                      timeout: float, timed_out: bool) -> TestReport:
    """Grade the checked command's output: tampered when a canary, the log or the record says it was forged;
    unresolved (not trusted) when the log was cut or the session died before every canary's result was known."""
    plan = checks.plan
    plan.drop_modules(graded.skipped_modules)
    rc = graded.rc if graded.rc is not None else 137
    report = TestReport(resolved=False, mode=mode, rc=rc, seconds=seconds, timed_out=timed_out,
                        truncated=graded.truncated, output_bytes=graded.output_bytes)
    try:
        statuses = parse_test_log(graded.log, task.log_parser)
    except ValueError as exc:
        report.error = f"task {task.task_id}: {exc}"
        return report
    clean_log, report.statuses = scrub(plan, graded.log, statuses)
    report.log_tail = clean_log[-LOG_TAIL_CHARS:]
    if timed_out:
        return _apply_rule(task, report, mode, timeout)
    record = parse_record(graded.record_text) if checks.recorder else None
    describe = {c.test_id: c.describe() for c in plan.canaries}
    evidence = check_integrity(graded.log, rc, record, checks.single_pytest, describe)
    finished = record.finished if record is not None else not checks.recorder
    if checks.recorder and checks.single_pytest and record is None and rc == 0:
        evidence.append("the test command exited 0 but pytest's session never finished")
    if record is not None:
        evidence += compare_with_log(statuses, record, describe)
    canaries = check_canaries(plan, statuses, record, finished, log_complete=not graded.truncated)
    evidence += canaries.tampered
    if evidence:
        report.mark_tampered(*evidence)
        return report
    if plan.canaries and rc == 1 and not any(s in ("FAILED", "ERROR") for s in report.statuses.values()):
        report.rc = 0 if report.statuses else 5  # the canaries' failures were the only ones
    if canaries.lost:
        why = "the output was cut" if graded.truncated else f"the pytest session did not finish (exit {rc})"
        report.error = f"the run is not trusted: {why} before every canary's result was known"
        return report
    if checks.recorder and record is None:
        report.error = f"the pytest session did not finish (exit {rc}); the run is not trusted"
        return report
    return _apply_rule(task, report, mode, timeout)
