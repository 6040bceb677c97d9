"""Grading functions: swebench log parsing, the SWE-bench FAIL_TO_PASS/PASS_TO_PASS rule, the R2E equality rule."""

from __future__ import annotations

import pytest

from graph_planner.grading import grade_expected_output, grade_fail_to_pass, parse_test_log, r2e_key
from graph_planner.grading.r2e_grade import expected_output_diff, r2e_statuses

# Verbatim `pytest -rA` summary (pytest 9) of a file with a class, params, skip, xfail, error and a failure.
PYTEST_RA_LOG = """\
============================= test session starts ==============================
collected 7 items

test_x.py .F..sxE                                                        [100%]
=========================== short test summary info ============================
PASSED test_x.py::TestA::test_ok
PASSED test_x.py::test_p[2]
SKIPPED [1] test_x.py:7: no
XFAIL test_x.py::test_xf
ERROR test_x.py::test_err
FAILED test_x.py::TestA::test_bad - AssertionError: one - two
========== 1 failed, 2 passed, 1 skipped, 1 xfailed, 1 error in 0.63s ==========
"""


def test_pytest_ra_lines_parse_into_per_test_statuses():
    assert parse_test_log(PYTEST_RA_LOG, "pytest") == {
        "test_x.py::TestA::test_ok": "PASSED",
        "test_x.py::test_p[2]": "PASSED",
        "test_x.py::test_xf": "XFAIL",
        "test_x.py::test_err": "ERROR",
        "test_x.py::TestA::test_bad": "FAILED",
    }


def test_parser_names_accept_swebench_spelling_and_reject_unknown():
    assert parse_test_log(PYTEST_RA_LOG, "parse_log_pytest") == parse_test_log(PYTEST_RA_LOG, "pytest")
    assert parse_test_log("\x1b[32mPASSED\x1b[0m t.py::test_a\n", "pytest_v2") == {"t.py::test_a": "PASSED"}
    with pytest.raises(ValueError, match="unknown log parser 'nosuch'.*pytest_v2"):
        parse_test_log(PYTEST_RA_LOG, "nosuch")


def test_log_without_summary_lines_yields_no_statuses():
    assert parse_test_log("collected 0 items\nINTERNALERROR> boom\n", "pytest") == {}


@pytest.mark.parametrize(("test_id", "key"), [
    ("r2e_tests/test_1.py::TestCalc::test_add", "TestCalc.test_add"),
    ("r2e_tests/test_1.py::test_free", "test_free"),
    ("r2e_tests/test_1.py::TestA::test_p[x-1]", "TestA.test_p[x-1]"),
    ("\x1b[31mr2e_tests/test_1.py::TestA::test_b - AssertionError\x1b[0m", "TestA.test_b"),
    ("r2e_tests/test_1.py", ""),  # file-level collection error: R2E's parser keys it as ""
])
def test_r2e_keys_drop_the_path_and_join_parts_with_dots(test_id, key):
    assert r2e_key(test_id) == key


F2P = ["t.py::test_fixed"]
P2P = ["t.py::test_kept", "t.py::test_kept2"]


def test_swebench_rule_resolved_when_f2p_pass_and_p2p_still_pass():
    statuses = {"t.py::test_fixed": "PASSED", "t.py::test_kept": "PASSED", "t.py::test_kept2": "XFAIL"}
    resolved, f2p, p2p = grade_fail_to_pass(statuses, F2P, P2P)
    assert resolved and f2p == {"success": F2P, "failure": []} and p2p["failure"] == []


def test_swebench_rule_p2p_breakage_is_not_resolved():
    statuses = {"t.py::test_fixed": "PASSED", "t.py::test_kept": "FAILED", "t.py::test_kept2": "PASSED"}
    resolved, f2p, p2p = grade_fail_to_pass(statuses, F2P, P2P)
    assert not resolved and f2p["failure"] == [] and p2p["failure"] == ["t.py::test_kept"]


def test_swebench_rule_missing_or_skipped_f2p_is_not_resolved():
    kept = {"t.py::test_kept": "PASSED", "t.py::test_kept2": "PASSED"}
    assert not grade_fail_to_pass(kept, F2P, P2P)[0]
    assert not grade_fail_to_pass({**kept, "t.py::test_fixed": "SKIPPED"}, F2P, P2P)[0]
    assert not grade_fail_to_pass({**kept, "t.py::test_fixed": "ERROR"}, F2P, P2P)[0]
    # a skipped PASS_TO_PASS test is not a regression (swebench semantics)
    assert grade_fail_to_pass({"t.py::test_fixed": "PASSED", "t.py::test_kept": "SKIPPED",
                               "t.py::test_kept2": "PASSED"}, F2P, P2P)[0]


EXPECTED = {"TestCalc.test_add": "PASSED", "TestCalc.test_sub": "PASSED", "test_legacy": "FAILED"}


def _full(statuses: dict[str, str]) -> dict[str, str]:
    ids = {"TestCalc.test_add": "r2e_tests/test_1.py::TestCalc::test_add",
           "TestCalc.test_sub": "r2e_tests/test_1.py::TestCalc::test_sub",
           "test_legacy": "r2e_tests/test_2.py::test_legacy", "test_new": "r2e_tests/test_2.py::test_new"}
    return {ids[k]: v for k, v in statuses.items()}


def test_r2e_rule_equal_maps_resolve():
    assert grade_expected_output(_full(EXPECTED), EXPECTED)


@pytest.mark.parametrize("statuses", [
    {"TestCalc.test_add": "PASSED", "TestCalc.test_sub": "PASSED"},  # a key missing
    {**EXPECTED, "test_new": "PASSED"},  # an extra key
    {**EXPECTED, "TestCalc.test_sub": "FAILED"},  # a status differs
    {**EXPECTED, "test_legacy": "PASSED"},  # expected FAILED must stay FAILED
])
def test_r2e_rule_any_difference_is_not_resolved(statuses):
    assert not grade_expected_output(_full(statuses), EXPECTED)


def test_r2e_rule_ignores_skipped_and_xfail_like_r2e_parser():
    statuses = {**_full(EXPECTED), "r2e_tests/test_2.py::test_skipped": "SKIPPED", "r2e_tests/t.py::x": "XFAIL"}
    assert r2e_statuses(statuses) == EXPECTED
    assert grade_expected_output(statuses, EXPECTED)
    # expected keys are cut at the first " - " too, exactly like R2E does on both sides
    with_message = {k if k != "test_legacy" else "test_legacy - AssertionError: x": v for k, v in EXPECTED.items()}
    assert grade_expected_output(_full(EXPECTED), with_message)
    assert expected_output_diff(_full({"TestCalc.test_add": "FAILED"}), EXPECTED) == {
        "missing": ["TestCalc.test_sub", "test_legacy"], "unexpected": [], "wrong_status": ["TestCalc.test_add"]}
