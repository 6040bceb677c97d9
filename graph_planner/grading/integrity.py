"""Log integrity: a pytest log that contradicts itself was forged. Three checks on the graded run's output:

- one status per test id (pytest's ``-rA`` summary prints a test once; a teardown error beside a pass is the one
  honest pair, allowed when pytest's own record shows the failing teardown);
- no status line after pytest's final summary line (``==== 3 passed in 0.1s ====`` is the last thing pytest
  writes; lines after it were written by someone else, e.g. at interpreter exit);
- an exit status consistent with the statuses, for a command that is one pytest run (pytest cannot exit 0 with a
  FAILED or ERROR test, and exits with the status its own record holds); a script or a chain (`pytest ... || true`)
  has an exit status of its own.
"""

from __future__ import annotations

import re
import shlex

from graph_planner.grading.recorder import RunRecord

STATUS_WORDS = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
_STATUS_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S.*?)[ \t]*$", re.M)
_FINAL_SUMMARY = re.compile(r"^=+ .*\bin \d+(?:\.\d+)?s\b.*=+[ \t]*$", re.M)


def status_lines(log: str) -> list[tuple[int, str, str]]:
    """(offset, status, test id) of every short-summary status line (the lines swebench's pytest parser reads).
    The id is the whole rest of the line (less pytest's ` - message`): a parametrised id may hold spaces, and
    two such tests must not look like one test reported twice."""
    out = []
    for match in _STATUS_LINE.finditer(log):
        test_id = match.group(2).split(" - ", 1)[0].strip()
        if "::" in test_id or test_id.endswith(".py"):
            out.append((match.start(), match.group(1), test_id))
    return out


def single_pytest_command(cmd: str) -> bool:
    """True when the test command is one pytest run (its exit status is pytest's), not a script or a chain."""
    if any(op in cmd for op in (";", "&&", "||", "|", "`", "$(", "\n")):
        return False
    try:
        words = shlex.split(cmd)
    except ValueError:
        return False
    return any(w == "pytest" or w.endswith("/pytest") or w in ("py.test",) for w in words[:4]) or \
        (len(words) > 2 and words[1] == "-m" and words[2] == "pytest")


def check_integrity(log: str, rc: int, record: RunRecord | None, single_pytest: bool,
                    describe: dict[str, str]) -> list[str]:
    """Evidence of a self-contradicting run (empty = consistent). ``describe``: canary id -> how to name it."""
    evidence: list[str] = []
    lines = status_lines(log)
    seen: dict[str, set[str]] = {}
    for _, status, test_id in lines:
        seen.setdefault(test_id, set()).add(status)
    for test_id, found in seen.items():
        if len(found) < 2:
            continue
        teardown_pair = found == {"PASSED", "ERROR"} and record is not None and record.teardown_failed(test_id)
        if not teardown_pair:
            who = describe.get(test_id, test_id)
            evidence.append(f"{who} is reported with several statuses ({', '.join(sorted(found))})")
    summaries = list(_FINAL_SUMMARY.finditer(log))
    if summaries:
        end = summaries[-1].end()
        late = [(status, test_id) for offset, status, test_id in lines if offset > end]
        if late:
            status, test_id = late[0]
            evidence.append(f"{len(late)} status line(s) after pytest's final summary line (first: {status} "
                            f"{describe.get(test_id, test_id)})")
    failing = any(status in ("FAILED", "ERROR") for _, status, _ in lines)
    if single_pytest and rc == 0 and failing:
        evidence.append("the test command exited 0 although the log holds FAILED/ERROR tests")
    if single_pytest and record is not None and record.finished and rc != record.exitstatus:
        evidence.append(f"the test command exited {rc} but pytest's session ended with exit status "
                        f"{record.exitstatus}")
    return evidence
