"""Trajectory JSONL (one line for the reset, one per step: action, observation, reward, info) and replay: feed
the recorded actions to a fresh env and check that the same observations come out. Repairs replay the
recorded synthesiser proposals, so a replay needs no model and is deterministic."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graph_planner.disk import atomic_write_text
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.episode.actions import action_from_dict
from graph_planner.episode.patch import PatchProposal, RepairRequest
from graph_planner.episode.turns import Trajectory
from graph_planner.episode.wire import ActionParseError


def trajectory_lines(trajectory: Trajectory) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [{"kind": "reset", "task_id": trajectory.task_id,
                                    "max_steps": trajectory.info.get("max_steps"),
                                    "observation": trajectory.info.get("initial_observation", "")}]
    for i, turn in enumerate(trajectory.turns, start=1):
        info = turn.info
        lines.append({
            "kind": "step", "step": i, "action": turn.action, "response_text": turn.response_text,
            "raw_output": info.get("raw_output"),
            "parse_error": {"code": info["parse_error"], "detail": info.get("parse_error_detail", "")}
            if info.get("parse_error") else None,
            "used_fallback": turn.used_fallback, "observation": turn.observation, "reward": turn.reward,
            "done": i == len(trajectory.turns), "info": info,
        })
    return lines


def write_trajectory_jsonl(path: str | Path, trajectory: Trajectory) -> Path:
    """Write (overwrite) one episode as JSONL a person can read and `replay` can re-run."""
    text = "".join(json.dumps(line, ensure_ascii=False, default=str) + "\n" for line in trajectory_lines(trajectory))
    return atomic_write_text(path, text)  # a full disk leaves no cut trajectory that replay would trust


def read_trajectory_jsonl(path: str | Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from None
    if not rows or rows[0].get("kind") != "reset":
        raise ValueError(f"{path}: a trajectory JSONL starts with a 'reset' line")
    return rows


class RecordedSynthesizer:
    """Returns the proposals recorded in a trajectory, in order (replay needs no model)."""

    name = "recorded"

    def __init__(self, proposals: list[PatchProposal]) -> None:
        self._proposals = list(proposals)

    def synthesize(self, request: RepairRequest) -> PatchProposal:
        if not self._proposals:
            return PatchProposal(error="replay: no recorded proposal left")
        return self._proposals.pop(0)


@dataclass
class ReplayReport:
    steps: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def replay(path: str | Path, env: PlannerEnv, use_recorded_patches: bool = True) -> ReplayReport:
    """Reset ``env`` and step it with the recorded actions; every observation must equal the recorded one."""
    rows = read_trajectory_jsonl(path)
    if rows[0].get("task_id") != env.task.task_id:
        raise ValueError(f"{path} records task {rows[0].get('task_id')!r}, the env holds {env.task.task_id!r}")
    if use_recorded_patches:
        proposals = [PatchProposal.from_dict(r["info"]["repair"]["proposal"]) for r in rows[1:]
                     if (r.get("info") or {}).get("repair")]
        env.synthesizer = RecordedSynthesizer(proposals)
    report = ReplayReport()
    if rows[0].get("max_steps"):
        env.max_steps = int(rows[0]["max_steps"])
    text, _ = env.reset()
    if rows[0].get("observation") and text != rows[0]["observation"]:
        report.mismatches.append({"step": 0, "expected": rows[0]["observation"], "got": text})
    for row in rows[1:]:
        report.steps += 1
        error = row.get("parse_error")
        parse_error = ActionParseError(error["code"], error["detail"]) if error else None
        if row.get("action") is not None:
            result = env.step(action_from_dict(row["action"]), parse_error=parse_error,
                              used_fallback=bool(row.get("used_fallback")))
        else:
            raw = row.get("raw_output")
            result = env.step(raw if raw is not None else row.get("response_text", ""))
        if result.observation != row["observation"]:
            report.mismatches.append({"step": row["step"], "expected": row["observation"], "got": result.observation})
        if result.done:
            break
    return report
