"""Append-only per-task eval results (results.jsonl) and the SWE-bench predictions file derived from them.

One line is appended and fsync'ed per finished task, so a run killed with SIGKILL loses at most the task in
flight; a torn last line is dropped on reload, and duplicates (if any) resolve to the first record.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from graph_planner.disk import atomic_write_text

OutcomeCategory = Literal[
    "resolved", "unresolved", "no_patch", "patch_failed", "timeout", "sandbox_error", "agent_error", "tampered"
]
Verdict = Literal["resolved", "unresolved", "tampered", "error"]


class TaskResult(BaseModel):
    """What one finished task contributes to results.jsonl (and, via model_patch, to predictions.jsonl)."""

    instance_id: str
    status: Literal["finished", "error"] = "finished"
    resolved: bool = False
    category: OutcomeCategory = "unresolved"
    model_patch: str = ""
    tests: dict[str, Any] = Field(default_factory=dict, description="Per-test statuses + F2P/P2P reports.")
    steps: int = 0
    tokens: int = 0
    seconds: float = 0.0
    reward: float = 0.0
    termination_reason: str = ""
    error: str | None = None
    label: str = Field("policy", description="policy, or a baseline label (baseline:gold / baseline:empty).")
    info: dict[str, Any] = Field(default_factory=dict)
    tampered: bool = Field(False, description="A graded test run of the episode was forged from inside the test "
                           "process (never resolved).")
    tamper_evidence: list[str] = Field(default_factory=list, description="Which check caught it (canaries by role).")
    test_output: str | None = Field(None, description="The final graded test run's log, kept per instance as the "
                                    "SWE-bench harness keeps test_output.txt: a path relative to the eval dir.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> Verdict:
        """One word, as TestReport.verdict: tampered beats error, then resolved / unresolved."""
        if self.tampered:
            return "tampered"
        if self.status == "error":
            return "error"
        return "resolved" if self.resolved else "unresolved"


class ResultsStore:
    """Thread-safe appender over ``results.jsonl``; knows which tasks are finished for resume."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()

    def _repair_torn_tail(self) -> None:
        """A SIGKILL mid-write can leave a partial last line; cut it so the next append starts clean."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with self.path.open("r+b") as fh:
                fh.truncate(cut)

    def load(self, label: str | None = None) -> list[TaskResult]:
        if not self.path.exists():
            return []
        rows: dict[tuple[str, str], TaskResult] = {}
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                row = TaskResult.model_validate_json(line)
            except ValueError:
                continue  # a torn line from a killed writer
            if label is not None and row.label != label:
                continue
            key = (row.label, row.instance_id)
            # first finished row wins; an error row is replaced by a later attempt of the same task
            if key not in rows or (rows[key].status == "error" and row.status == "finished"):
                rows[key] = row
        return list(rows.values())

    def finished_ids(self, label: str = "policy") -> set[str]:
        """Tasks with a finished row; errored tasks (sandbox died, model server down) are tried again."""
        return {r.instance_id for r in self.load(label) if r.status == "finished"}

    def append(self, result: TaskResult) -> None:
        line = result.model_dump_json() + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


def write_predictions(path: Path, results: Iterable[TaskResult], model_name: str) -> int:
    """SWE-bench harness format: one {instance_id, model_name_or_path, model_patch} per line (atomic rewrite),
    plus our ``verdict`` and ``test_output`` (the kept test log, relative to the eval dir; the harness reads only
    its own keys)."""
    rows = [
        {"instance_id": r.instance_id, "model_name_or_path": model_name, "model_patch": r.model_patch,
         "verdict": r.verdict, "test_output": r.test_output}
        for r in results
        if r.label == "policy"
    ]
    atomic_write_text(path, "".join(json.dumps(row) + "\n" for row in rows))
    return len(rows)
