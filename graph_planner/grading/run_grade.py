"""Grade one finished test command: parse its log with the task's swebench parser and apply the task's rule
(SWE-bench F2P/P2P, R2E expected outputs, or "every selected test passes"). Pure: no sandbox here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from graph_planner.episode.results import ExecResult, TestReport
from graph_planner.grading.parse import parse_test_log
from graph_planner.grading.r2e_grade import grade_expected_output
from graph_planner.grading.swebench_grade import grade_fail_to_pass

if TYPE_CHECKING:
    from graph_planner.data.record import TaskRecord

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
    if result.timed_out:
        limit = f" after {timeout:g}s (sandbox.test_timeout)" if timeout else ""
        report.error = f"test command timed out{limit}"
        return report
    failing = any(s in ("FAILED", "ERROR") for s in report.statuses.values())
    if result.rc != 0 and not failing:
        # swebench 5 rule: a non-zero exit with no failing test means the log cannot be trusted
        report.error = (f"test command exited {result.rc} but no test FAILED/ERROR was parsed "
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
