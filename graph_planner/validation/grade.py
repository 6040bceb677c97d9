"""Grade a patch the way nothing the agent did can steer: a FRESH sandbox of the task (no state left by the
episode: no planted hooks, no files outside the repo, no background process), the patch guarded and applied,
the task's test and pytest-config files restored (graph_planner.grading.guard), hidden tests installed, the graded
command run. The library behind `gp grade` (any SWE-bench-format predictions file) and the final verdict of an
episode."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from graph_planner.sandbox.base import PatchRejected, SandboxError

if TYPE_CHECKING:
    from graph_planner.config.schema import RunConfig
    from graph_planner.data.record import TaskRecord
    from graph_planner.episode.results import TestReport

GradeStatus = Literal["resolved", "unresolved", "tampered", "rejected", "empty_patch", "error"]


class PatchGrade(BaseModel):
    """One prediction graded."""

    instance_id: str
    status: GradeStatus
    resolved: bool = False
    backend: str = ""
    rejection: str | None = Field(None, description="Why the patch was refused (links, escapes, does not apply).")
    error: str | None = Field(None, description="Why grading could not run (sandbox, test command, missing task).")
    guard: list[str] = Field(default_factory=list, description="Test / pytest-config files the guard restored.")
    fail_to_pass: dict[str, list[str]] = Field(default_factory=dict)
    pass_to_pass: dict[str, list[str]] = Field(default_factory=dict)
    statuses: dict[str, str] = Field(default_factory=dict)
    seconds: float = 0.0
    tamper_evidence: list[str] = Field(default_factory=list, description="Why the run was graded tampered (forged "
                                       "from inside the test process): which check, canaries by role.")
    truncated: bool = Field(False, description="The test output was cut to the grader's cap (head and tail kept).")
    output_bytes: int | None = None


def _from_report(task_id: str, backend: str, report: TestReport, seconds: float) -> PatchGrade:
    status: GradeStatus = report.verdict  # type: ignore[assignment] - tampered | error | resolved | unresolved
    return PatchGrade(instance_id=task_id, status=status, resolved=report.resolved and not report.error,
                      backend=backend, error=report.error, guard=report.guard, fail_to_pass=report.fail_to_pass,
                      pass_to_pass=report.pass_to_pass, statuses=report.statuses, seconds=round(seconds, 3),
                      tamper_evidence=report.tamper_evidence, truncated=report.truncated,
                      output_bytes=report.output_bytes)


def grade_patch(task: TaskRecord, patch: str, config: RunConfig, dataset_dir: str | Path | None,
                backend: str | None = None, run_id: str | None = None) -> PatchGrade:
    """Grade ``patch`` on ``task`` in a fresh sandbox; never raises for a bad patch or a broken sandbox."""
    from graph_planner.sandbox.factory import backend_for, make_sandbox
    from graph_planner.sandbox.patching import check_patch

    name = backend or backend_for(task, config)
    start = time.monotonic()
    if not patch or not patch.strip():
        return PatchGrade(instance_id=task.task_id, status="empty_patch", backend=name)
    try:
        check_patch(patch)
    except PatchRejected as exc:
        return PatchGrade(instance_id=task.task_id, status="rejected", backend=name, rejection=str(exc))
    try:
        sandbox = make_sandbox(task, config, dataset_dir, run_id or f"grade-{uuid.uuid4().hex[:8]}", backend=name)
        with sandbox:
            try:
                sandbox.apply_patch(patch)
            except PatchRejected as exc:
                return PatchGrade(instance_id=task.task_id, status="rejected", backend=name, rejection=str(exc),
                                  seconds=round(time.monotonic() - start, 3))
            report = sandbox.run_tests()
    except SandboxError as exc:
        return PatchGrade(instance_id=task.task_id, status="error", backend=name, error=f"sandbox error: {exc}",
                          seconds=round(time.monotonic() - start, 3))
    return _from_report(task.task_id, name, report, time.monotonic() - start)


class PredictionsError(ValueError):
    """A predictions file that cannot be read; the message names the file and the row."""


#: Names a duplicate-id problem (a warning: the row is graded, the earlier one is not).
DUPLICATE = "duplicate instance_id"


def read_predictions(path: str | Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """SWE-bench predictions (JSONL rows or one JSON list/dict) -> {instance_id: row}, plus per-row problems."""
    file = Path(path)
    try:
        text = file.read_bytes().decode("utf-8")
    except OSError as exc:
        raise PredictionsError(f"cannot read predictions {file}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise PredictionsError(f"{file}: not UTF-8 (byte {exc.start}); predictions must be UTF-8 JSON") from None
    rows: list[tuple[str, Any]] = []
    try:
        whole: Any = json.loads(text)
    except json.JSONDecodeError:
        whole = None  # JSONL (or broken JSON: reported per line below)
    if isinstance(whole, list):
        rows = [(f"item {i + 1}", item) for i, item in enumerate(whole)]
    elif isinstance(whole, dict) and whole and all(isinstance(v, dict) for v in whole.values()):
        # {instance_id: row}: the harness accepts this form too
        rows = [(f"key {key!r}", item) for key, item in whole.items()]
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((f"line {number}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    rows.append((f"line {number}", exc))
    predictions: dict[str, dict[str, Any]] = {}
    seen_at: dict[str, str] = {}
    problems: list[str] = []
    for where, row in rows:
        if isinstance(row, Exception):
            problems.append(f"{file} {where}: not valid JSON ({row})")
        elif not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            problems.append(f"{file} {where}: needs an object with a string instance_id")
        elif row.get("model_patch") is not None and not isinstance(row.get("model_patch"), str):
            problems.append(f"{file} {where}: model_patch of {row['instance_id']} is not a string")
        else:
            instance_id = row["instance_id"]
            if instance_id in predictions:  # the SWE-bench harness builds a dict of the rows: the last one wins
                problems.append(f"{file} {where}: {DUPLICATE} {instance_id} (also {seen_at[instance_id]}): "
                                f"{where} is graded, as the SWE-bench harness does")
                del predictions[instance_id]  # keeps the order of the rows that are graded
            predictions[instance_id] = row
            seen_at[instance_id] = where
    return predictions, problems


def grade_predictions(tasks: list[TaskRecord], predictions: dict[str, dict[str, Any]], config: RunConfig,
                      dataset_dir: str | Path | None, backend: str | None = None,
                      on_grade: Callable[[PatchGrade], None] | None = None) -> list[PatchGrade]:
    """Grade every prediction whose instance is in ``tasks``; unknown ids are errors (named), not skipped."""
    by_id = {t.task_id: t for t in tasks}
    run_id = f"grade-{uuid.uuid4().hex[:8]}"
    grades: list[PatchGrade] = []
    for instance_id, row in predictions.items():
        task = by_id.get(instance_id)
        if task is None:
            grade = PatchGrade(instance_id=instance_id, status="error",
                               error=f"instance {instance_id} is not in the dataset")
        else:
            grade = grade_patch(task, row.get("model_patch") or "", config, dataset_dir, backend, run_id)
        grades.append(grade)
        if on_grade is not None:
            on_grade(grade)
    return grades


def grade_summary(grades: list[PatchGrade], problems: list[str]) -> dict[str, Any]:
    counts = {status: sum(g.status == status for g in grades)
              for status in ("resolved", "unresolved", "tampered", "rejected", "empty_patch", "error")}
    return {"submitted": len(grades), **counts,
            "resolved_rate": counts["resolved"] / len(grades) if grades else 0.0,
            "input_problems": problems}
