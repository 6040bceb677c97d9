"""Grading: test-log parsing (swebench parsers), FAIL_TO_PASS/PASS_TO_PASS and R2E expected-output rules, and
`gp validate-tasks` (gold patch must resolve, empty patch must not). Pure functions except validate."""

from graph_planner.grading.parse import parse_test_log, r2e_key
from graph_planner.grading.r2e_grade import grade_expected_output, r2e_statuses
from graph_planner.grading.swebench_grade import grade_fail_to_pass

__all__ = ["grade_expected_output", "grade_fail_to_pass", "parse_test_log", "r2e_key", "r2e_statuses"]
