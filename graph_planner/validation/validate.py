"""Task validation before any training: in a real sandbox, the gold patch must grade resolved and the empty patch
must grade unresolved, for every task. Tasks that fail are reported (with their statuses), never silently used."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from graph_planner.episode.results import TestReport

if TYPE_CHECKING:
    from graph_planner.config.schema import RunConfig
    from graph_planner.data.record import TaskRecord

log = logging.getLogger(__name__)


class RunOutcome(BaseModel):
    """One graded run (gold or empty patch) of a task."""

    resolved: bool
    statuses: dict[str, str] = Field(default_factory=dict)
    fail_to_pass: dict[str, list[str]] = Field(default_factory=dict)
    pass_to_pass: dict[str, list[str]] = Field(default_factory=dict)
    expected_output_diff: dict[str, list[str]] | None = None
    rc: int = 0
    seconds: float = 0.0
    timed_out: bool = False
    error: str | None = None
    tampered: bool = False
    tamper_evidence: list[str] = Field(default_factory=list)


class TaskValidation(BaseModel):
    """Validation of one task: ok iff gold resolves, empty does not, and nothing errored."""

    task_id: str
    backend: str
    mode: str
    ok: bool
    gold: RunOutcome | None = None
    empty: RunOutcome | None = None
    seconds: float = 0.0
    error: str | None = Field(None, description="Why the task failed validation (None when ok).")


class ValidationReport(BaseModel):
    dataset: str
    backend: str | None = Field(None, description="Backend forced for every task (None = per task/config).")
    tasks: list[TaskValidation] = Field(default_factory=list)

    @property
    def failed(self) -> list[TaskValidation]:
        return [t for t in self.tasks if not t.ok]

    @property
    def ok(self) -> bool:
        return bool(self.tasks) and not self.failed


def _outcome(task: TaskRecord, report: TestReport) -> RunOutcome:
    diff = None
    if report.mode == "r2e" and task.expected_output is not None:
        from graph_planner.grading.r2e_grade import expected_output_diff

        diff = expected_output_diff(report.statuses, task.expected_output)
    return RunOutcome(resolved=report.resolved, statuses=report.statuses, fail_to_pass=report.fail_to_pass,
                      pass_to_pass=report.pass_to_pass, expected_output_diff=diff, rc=report.rc,
                      seconds=round(report.seconds, 3), timed_out=report.timed_out, error=report.error,
                      tampered=report.tampered, tamper_evidence=report.tamper_evidence)


def _failure_reason(gold: RunOutcome, empty: RunOutcome) -> str | None:
    reasons = []
    if gold.tampered:
        reasons.append(f"the gold patch's run was graded tampered ({'; '.join(gold.tamper_evidence)}): a false "
                       "alarm of the forgery checks, or a task whose own code tampers with the test run")
    elif not gold.resolved:
        detail = gold.error or _unresolved_detail(gold)
        reasons.append(f"gold patch does not resolve the task ({detail})")
    if empty.resolved:
        reasons.append("the empty patch already resolves the task (FAIL_TO_PASS / expected outputs are wrong)")
    elif empty.error:
        reasons.append(f"empty-patch run errored: {empty.error}")
    return "; ".join(reasons) or None


def _unresolved_detail(run: RunOutcome) -> str:
    if run.expected_output_diff is not None:
        return ", ".join(f"{k}: {v[:5]}" for k, v in run.expected_output_diff.items() if v) or "statuses differ"
    failing = run.fail_to_pass.get("failure", []) + run.pass_to_pass.get("failure", [])
    return f"failing: {failing[:5]}" if failing else f"{len(run.statuses)} statuses parsed"


def validate_task(task: TaskRecord, config: RunConfig, dataset_dir: str | Path, backend: str | None = None,
                  run_id: str | None = None) -> TaskValidation:
    """Gold patch → must be resolved; restore; no patch → must not be resolved. Errors are recorded, not raised."""
    from graph_planner.sandbox.factory import backend_for, make_sandbox

    name = backend_for(task, config, backend)
    start = time.monotonic()
    result = TaskValidation(task_id=task.task_id, backend=name, mode=task.grading_mode, ok=False)
    if not task.gold_patch:
        result.error = "task has no gold_patch, so it cannot be validated"
        return result
    try:
        sandbox = make_sandbox(task, config, dataset_dir, run_id or f"validate-{uuid.uuid4().hex[:8]}", backend=name)
        with sandbox:
            base = sandbox.snapshot()
            sandbox.apply_patch(task.gold_patch)
            result.gold = _outcome(task, sandbox.run_tests())
            sandbox.restore(base)
            result.empty = _outcome(task, sandbox.run_tests())
    except Exception as exc:  # noqa: BLE001 -- one broken task must not stop the others; it is reported
        result.error = f"{type(exc).__name__}: {exc}"
    else:
        result.error = _failure_reason(result.gold, result.empty)
        result.ok = result.error is None
    result.seconds = round(time.monotonic() - start, 3)
    return result


def validate_tasks(records: Iterable[TaskRecord], config: RunConfig, dataset_dir: str | Path,
                   backend: str | None = None, dataset: str = "",
                   on_task: Callable[[TaskValidation], Any] | None = None) -> ValidationReport:
    """Validate every record in order; ``on_task`` is called after each (progress display)."""
    report = ValidationReport(dataset=dataset or str(dataset_dir), backend=backend)
    run_id = f"validate-{uuid.uuid4().hex[:8]}"
    for task in records:
        outcome = validate_task(task, config, dataset_dir, backend, run_id)
        if not outcome.ok:
            log.warning("task %s failed validation: %s", task.task_id, outcome.error)
        report.tasks.append(outcome)
        if on_task is not None:
            on_task(outcome)
    return report
