"""Grading: test-log parsing (swebench parsers), FAIL_TO_PASS/PASS_TO_PASS and R2E expected-output rules, and the
grade of one finished test command (``run_grade``). Pure functions, no sandbox: the sandbox backends call them
from ``run_tests``; `gp validate-tasks`, which runs sandboxes, lives one layer up in ``graph_planner.validation``."""

from graph_planner.grading.parse import parse_test_log, r2e_key
from graph_planner.grading.r2e_grade import grade_expected_output, r2e_statuses
from graph_planner.grading.swebench_grade import grade_fail_to_pass

__all__ = ["grade_expected_output", "grade_fail_to_pass", "parse_test_log", "r2e_key", "r2e_statuses"]
