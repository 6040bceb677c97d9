"""The second record of a graded run: a tiny pytest plugin, loaded with ``-p <fresh name>`` through PYTEST_ADDOPTS
from a temp dir outside the repository (nothing a patch controls names it), that writes what pytest's own hooks
saw (each test's per-phase outcome, collection errors, deselected ids, the session's exit status) to that dir
once the session finishes.

swebench's log parsers stay the primary source of statuses (they define SWE-bench semantics); the record is the
witness they are checked against: a PASSED line pytest never saw pass, a run that exits without pytest finishing,
or an exit status that is not pytest's, is forgery. Code in the test process could forge the record too, but only
by knowing this mechanism and the run's fresh names.
"""

from __future__ import annotations

import json
import secrets

from pydantic import BaseModel, Field, ValidationError

#: PYTEST_DONT_REWRITE: pytest marks every ``-p`` plugin for assertion rewriting; this one has no assert to rewrite
_PLUGIN = '''\
"PYTEST_DONT_REWRITE"
import json as _json
_OUT = {out!r}
_REC = {{"reports": {{}}, "collect_errors": [], "deselected": [], "exitstatus": None}}


def pytest_collectreport(report):
    if report.failed:
        _REC["collect_errors"].append(report.nodeid)


def pytest_deselected(items):
    _REC["deselected"].extend(item.nodeid for item in items)


def pytest_runtest_logreport(report):
    _REC["reports"].setdefault(report.nodeid, {{}})[report.when] = \\
        report.outcome + ("-xfail" if hasattr(report, "wasxfail") else "")


@__import__("pytest").hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller writes the record
    _REC["exitstatus"] = int(session.exitstatus)
    with open(_OUT, "a") as handle:  # one line per session: a command may run pytest more than once
        handle.write(_json.dumps(_REC) + "\\n")
'''


class RunRecord(BaseModel):
    """What the plugin wrote (untrusted JSON from the test process: validated here)."""

    reports: dict[str, dict[str, str]] = Field(default_factory=dict)
    collect_errors: list[str] = Field(default_factory=list)
    deselected: list[str] = Field(default_factory=list)
    exitstatus: int | None = None

    @property
    def finished(self) -> bool:
        return self.exitstatus is not None

    def saw_pass(self, test_id: str) -> bool:
        """pytest reported ``test_id`` passed (its call phase; a parser may have cut a parametrised id short)."""
        phases = self.reports.get(test_id)
        if phases is None:
            phases = next((p for nodeid, p in self.reports.items() if nodeid.startswith(test_id)), None)
        return phases is not None and phases.get("call") == "passed" and phases.get("setup") == "passed"

    def teardown_failed(self, test_id: str) -> bool:
        phases = self.reports.get(test_id, {})
        return phases.get("teardown") == "failed" or phases.get("setup") == "failed"


def plugin_name() -> str:
    """A fresh importable module name: letters only, no fixed prefix to look for."""
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    return "".join(secrets.choice(alphabet) for _ in range(12))


def plugin_source(out_path: str) -> str:
    return _PLUGIN.format(out=out_path)


def parse_record(text: str) -> RunRecord | None:
    """The sessions' lines merged (the exit status is the last session's). None when the plugin wrote nothing
    (no session finished) or wrote something that is not a record."""
    merged: RunRecord | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            session = RunRecord.model_validate(json.loads(line))
        except (ValueError, ValidationError):
            return None
        if merged is None:
            merged = session
            continue
        for nodeid, phases in session.reports.items():
            merged.reports.setdefault(nodeid, {}).update(phases)
        merged.collect_errors += session.collect_errors
        merged.deselected += session.deselected
        merged.exitstatus = session.exitstatus
    return merged


def compare_with_log(statuses: dict[str, str], record: RunRecord, describe: dict[str, str]) -> list[str]:
    """Evidence where the log says a test passed and pytest's hooks never saw it pass. ``describe`` maps canary ids
    to how evidence names them (never by name)."""
    evidence = []
    for test_id, status in statuses.items():
        if status == "PASSED" and not record.saw_pass(test_id):
            who = describe.get(test_id, test_id)
            evidence.append(f"the log says {who} passed; pytest's own record never saw it pass")
    return evidence
