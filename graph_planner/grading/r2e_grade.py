"""R2E-Gym rule for native rows: resolved iff the parsed statuses EQUAL `expected_output_json` (same key set,
same status for each key); expected FAILED entries must stay FAILED."""

from __future__ import annotations

from graph_planner.grading.parse import r2e_key, strip_ansi

#: R2E's parser only records these; SKIPPED / XFAIL / XPASS lines are ignored.
R2E_COUNTED = ("PASSED", "FAILED", "ERROR")


def r2e_statuses(statuses: dict[str, str]) -> dict[str, str]:
    """swebench-parsed statuses (full pytest ids) → R2E keys, keeping only PASSED / FAILED / ERROR."""
    out: dict[str, str] = {}
    for test_id, status in statuses.items():
        if status in R2E_COUNTED:
            out[r2e_key(test_id)] = status
    return out


def _normalise_expected(expected: dict[str, str]) -> dict[str, str]:
    return {strip_ansi(k).split(" - ", 1)[0].strip(): v for k, v in expected.items()}


def grade_expected_output(statuses: dict[str, str], expected: dict[str, str]) -> bool:
    """R2E reward: ``statuses`` are swebench-parsed (full ids) or already R2E-keyed; equality decides."""
    parsed = r2e_statuses(statuses)
    wanted = _normalise_expected(expected)
    if len(parsed) != len(wanted):
        return False
    return all(key in wanted and wanted[key] == status for key, status in parsed.items())


def expected_output_diff(statuses: dict[str, str], expected: dict[str, str]) -> dict[str, list[str]]:
    """What differs from the expected map: tests missing, unexpected, or with another status (for reports)."""
    parsed = r2e_statuses(statuses)
    wanted = _normalise_expected(expected)
    return {
        "missing": sorted(set(wanted) - set(parsed)),
        "unexpected": sorted(set(parsed) - set(wanted)),
        "wrong_status": sorted(k for k in set(parsed) & set(wanted) if parsed[k] != wanted[k]),
    }
