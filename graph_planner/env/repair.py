"""The repair cycle: request -> synthesiser -> one patch form (unified diff) -> guard -> snapshot -> apply ->
syntax check -> the task's failing tests -> keep or roll back. Everything that happened is returned as data
(status, reason, symptoms, timings) so the env can show it in the next observation and count it."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from graph_planner.config.schema import EnvConfig
from graph_planner.data.record import TaskRecord
from graph_planner.env.test_view import agent_error, hidden_dirs, hidden_test_files, is_visible_test
from graph_planner.episode.patch import PatchFormatError, PatchProposal, RepairRequest, diff_stats, edits_to_diff
from graph_planner.episode.results import TestReport
from graph_planner.grading.r2e_grade import expected_output_diff
from graph_planner.models.synthesizers import PatchSynthesizer
from graph_planner.sandbox.base import PatchRejected, Sandbox, SandboxError
from graph_planner.sandbox.patching import check_patch

RepairStatus = Literal["kept", "rolled_back", "rejected", "no_patch", "dry_run"]
_PASSING = ("PASSED", "XFAIL")
_SYNTAX_CHECK = (
    "PY=$(command -v python3 || command -v python); \"$PY\" -c 'import sys\n"
    "bad = 0\n"
    "for path in sys.argv[1:]:\n"
    "    try:\n"
    "        compile(open(path, \"rb\").read(), path, \"exec\")\n"
    "    except SyntaxError as exc:\n"
    "        bad = 1; print(f\"{path}:{exc.lineno}: {exc.msg}\")\n"
    "sys.exit(bad)' "
)


@dataclass
class TestSummary:
    """A test run reduced to what the planner may see: counts and failure symptoms, never test source."""

    __test__ = False

    score: int
    total: int
    resolved: bool
    failing: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    #: The run was forged (TestReport.tampered): the agent sees only this word, never the evidence.
    tampered: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"passing": self.score, "total": self.total, "resolved": self.resolved, "failing": self.failing,
                "error": self.error, "tampered": self.tampered}


def failing_tests_selectors(task: TaskRecord) -> list[str] | None:
    """The task's failing tests: FAIL_TO_PASS ids (SWE-bench), or None = the full hidden run (R2E rows)."""
    return list(task.fail_to_pass) if task.grading_mode == "swebench" and task.fail_to_pass else None


def summarise_report(task: TaskRecord, report: TestReport, max_symptoms: int = 8) -> TestSummary:
    """Score = tests in the target state (F2P passing, or R2E statuses equal to the expected ones). A tampered
    run scores 0 and shows nothing of its log: its statuses are forged, and its evidence names the checks."""
    if report.tampered:
        total = len(task.expected_output or {}) if task.grading_mode == "r2e" and task.expected_output else \
            len(failing_tests_selectors(task) or report.statuses)
        return TestSummary(score=0, total=total, resolved=False, seconds=report.seconds, tampered=True)
    if task.grading_mode == "r2e" and task.expected_output is not None and report.mode != "selectors":
        diff = expected_output_diff(report.statuses, task.expected_output)
        total = len(task.expected_output)
        score = total - len(diff["missing"]) - len(diff["wrong_status"])
        wrong = diff["wrong_status"] + diff["missing"]
    else:
        wanted = failing_tests_selectors(task) or list(report.statuses)
        total = len(wanted)
        score = sum(1 for t in wanted if report.statuses.get(t) in _PASSING)
        wrong = [t for t in wanted if report.statuses.get(t) not in _PASSING]
    # hidden tests (the test_patch's files, R2E's dir) are counted, never named: ids and assertion text would
    # tell the policy what the grader checks (graph_planner.env.test_view)
    hidden, dirs = hidden_test_files(task), hidden_dirs(task)
    symptoms = [line.strip() for line in report.log_tail.splitlines()
                if line.startswith(("FAILED ", "ERROR "))
                and is_visible_test(line.split(" ", 1)[1].split(" - ", 1)[0], hidden, dirs)][:max_symptoms]
    if not symptoms:
        symptoms = [f"{t}: {report.statuses.get(t, 'not run')}" for t in wrong if is_visible_test(t, hidden, dirs)]
        symptoms = symptoms[:max_symptoms]
    concealed = sum(1 for t in wrong if not is_visible_test(t, hidden, dirs))
    if concealed:
        symptoms.append(f"{concealed} hidden test(s) not passing yet (hidden tests are counted, not shown)")
    return TestSummary(score=max(score, 0), total=total, resolved=report.resolved, failing=symptoms,
                       error=agent_error(report.error), seconds=report.seconds)


@dataclass
class RepairOutcome:
    status: RepairStatus
    reason: str | None = None
    diff: str = ""
    files: list[str] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    tests: TestSummary | None = None
    proposal: PatchProposal = field(default_factory=PatchProposal)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def reject_reason(self) -> str | None:
        """Short reason key for patch stats (`rejected` / `rolled_back` outcomes)."""
        return (self.reason or "").split(":", 1)[0] if self.status in ("rejected", "rolled_back") else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "reason": self.reason, "files": self.files, "added": self.added,
            "removed": self.removed, "tests": self.tests.to_dict() if self.tests else None,
            "diagnostic": self.proposal.diagnostic, "proposal": self.proposal.to_dict(),
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
        }


class RepairCycle:
    """Runs repairs for one episode; remembers the score of the current tree so a patch is kept only when it
    makes more of the failing tests pass (or resolves the task)."""

    def __init__(self, task: TaskRecord, sandbox: Sandbox, synthesizer: PatchSynthesizer, env: EnvConfig,
                 on_test_run: Callable[[str, TestReport, TestSummary], None] | None = None) -> None:
        self.task = task
        self.on_test_run = on_test_run
        self.sandbox = sandbox
        self.synthesizer = synthesizer
        self.env = env
        self.current: TestSummary | None = None
        self.protected = self._protected_paths(task)

    @staticmethod
    def _protected_paths(task: TaskRecord) -> set[str]:
        return {task.hidden_tests_dir.strip("/").split("/")[-1] or "r2e_tests", "r2e_tests"} | hidden_test_files(task)

    def run_failing_tests(self, kind: str = "run_tests") -> TestSummary:
        """Run the task's failing tests on the current tree (the `run_tests` action, and repair's check)."""
        report = self.sandbox.run_tests(failing_tests_selectors(self.task))
        summary = summarise_report(self.task, report)
        self.current = summary
        if self.on_test_run is not None:
            self.on_test_run(kind, report, summary)
        return summary

    def _read_current(self, path: str) -> str | None:
        try:
            return self.sandbox.read_file(path)
        except SandboxError:
            return None

    def normalise(self, proposal: PatchProposal) -> str:
        """Edits or diff -> one unified diff against the current tree (raises PatchFormatError)."""
        if proposal.edits:
            return edits_to_diff(proposal.edits, self._read_current)
        return proposal.diff or ""

    def guard(self, diff: str) -> list[str]:
        """Paths inside the repo, text only, size caps, hidden/grading tests untouchable; returns the files."""
        files = check_patch(diff, max_files=self.env.patch_max_files)
        touched_tests = [f for f in files if f in self.protected or f.split("/", 1)[0] in self.protected]
        if touched_tests:
            raise PatchRejected(f"touches-tests: the patch edits grading tests {touched_tests}")
        stats = diff_stats(diff)
        if stats["added"] + stats["removed"] > self.env.patch_max_lines:
            raise PatchRejected(f"too-large: {stats['added'] + stats['removed']} changed lines, over "
                                f"env.patch_max_lines={self.env.patch_max_lines}")
        return files

    def run(self, request: RepairRequest) -> RepairOutcome:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        proposal = self.synthesizer.synthesize(request)
        timings["synthesis"] = time.perf_counter() - t0
        if not proposal.has_patch:
            return RepairOutcome("no_patch", proposal.error or "the synthesiser returned an empty patch",
                                 proposal=proposal, seconds=timings)
        try:
            diff = self.normalise(proposal)
            if not diff.strip():
                raise PatchFormatError("the edits change nothing")
        except PatchFormatError as exc:
            return RepairOutcome("rejected", f"malformed: {exc}", proposal=proposal, seconds=timings)
        stats = diff_stats(diff)
        outcome = RepairOutcome("rejected", diff=diff, added=stats["added"], removed=stats["removed"],
                                proposal=proposal, seconds=timings)
        try:
            outcome.files = self.guard(diff)
        except PatchRejected as exc:
            reason = str(exc)
            outcome.reason = reason if reason.startswith(("touches-tests", "too-large")) else f"guard: {reason}"
            return outcome
        if not self.env.apply_patches:
            outcome.status, outcome.reason = "dry_run", "not applied (env.apply_patches is false)"
            return outcome
        if self.current is None:  # the score the patch must beat
            selectors = failing_tests_selectors(self.task)
            if selectors:  # FAIL_TO_PASS tests fail on the base tree by definition (checked by gp validate-tasks)
                self.current = TestSummary(score=0, total=len(selectors), resolved=False)
            else:
                t0 = time.perf_counter()
                self.run_failing_tests("repair_baseline")
                timings["baseline_tests"] = time.perf_counter() - t0
        snap = self.sandbox.snapshot()
        try:
            return self._apply_and_test(outcome, timings, snap)
        except BaseException:
            self.sandbox.restore(snap)  # never leave a half-applied patch behind a sandbox error
            raise

    def _apply_and_test(self, outcome: RepairOutcome, timings: dict[str, float], snap: str) -> RepairOutcome:
        before = self.current
        assert before is not None
        t0 = time.perf_counter()
        try:
            self.sandbox.apply_patch(outcome.diff)
        except PatchRejected as exc:
            self.sandbox.restore(snap)
            outcome.reason = f"does-not-apply: {str(exc)[:600]}"
            timings["apply"] = time.perf_counter() - t0
            return outcome
        py_files = [f for f in outcome.files if f.endswith(".py") and self._read_current(f) is not None]
        if py_files:
            res = self.sandbox.exec(_SYNTAX_CHECK + " ".join(shlex.quote(f) for f in py_files))
            if not res.ok:
                self.sandbox.restore(snap)
                outcome.status, outcome.reason = "rolled_back", f"syntax-error: {res.output.strip()[-400:]}"
                timings["apply"] = time.perf_counter() - t0
                return outcome
        timings["apply"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        after = self.run_failing_tests("repair")
        timings["tests"] = time.perf_counter() - t0
        outcome.tests = after
        if after.tampered:  # a forged run never keeps its patch, whatever it claims
            self.sandbox.restore(snap)
            self.current = before
            outcome.status, outcome.reason = "rolled_back", "tampered: the test run was forged"
            return outcome
        if after.resolved or after.score > before.score:
            outcome.status = "kept"
            outcome.reason = "resolves the failing tests" if after.resolved else \
                f"{after.score}/{after.total} failing tests now pass (was {before.score})"
            return outcome
        self.sandbox.restore(snap)
        self.current = before
        outcome.status = "rolled_back"
        outcome.reason = (f"tests-not-improved: {after.score}/{after.total} passing (was {before.score})"
                          + (f"; {after.error}" if after.error else ""))
        return outcome
