"""SWE-bench rule: resolved iff every FAIL_TO_PASS test passes and every PASS_TO_PASS test still passes,
computed by swebench's own `get_eval_tests_report` + `get_resolution_status` (FULL = resolved)."""

from __future__ import annotations


def grade_fail_to_pass(
    statuses: dict[str, str], fail_to_pass: list[str], pass_to_pass: list[str]
) -> tuple[bool, dict[str, list[str]], dict[str, list[str]]]:
    """Return (resolved, F2P report, P2P report); each report is {"success": [...], "failure": [...]}.

    A test missing from ``statuses`` counts as a failure (swebench semantics); XFAIL counts as a pass, and a
    SKIPPED PASS_TO_PASS test is not a regression.
    """
    from graph_planner.imports import import_lock

    with import_lock():  # grading runs in episode threads
        from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, ResolvedStatus
        from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    report = get_eval_tests_report(dict(statuses), {FAIL_TO_PASS: list(fail_to_pass), PASS_TO_PASS: list(pass_to_pass)})
    resolved = get_resolution_status(report) == ResolvedStatus.FULL.value
    f2p = {"success": list(report[FAIL_TO_PASS]["success"]), "failure": list(report[FAIL_TO_PASS]["failure"])}
    p2p = {"success": list(report[PASS_TO_PASS]["success"]), "failure": list(report[PASS_TO_PASS]["failure"])}
    return resolved, f2p, p2p
