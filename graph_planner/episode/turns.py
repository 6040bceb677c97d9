"""Trajectory records shared by the env, the agents, training and eval (plain data, JSON-serialisable)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from graph_planner.episode.summary import EpisodeSummary


@dataclass
class Turn:
    """One planner turn: what the model saw, what it said, and what the env answered."""

    prompt_messages: list[dict[str, Any]]
    response_text: str
    action: dict[str, Any] | None
    observation: str
    reward: float = 0.0
    parse_error: str | None = None
    used_fallback: bool = False
    prompt_token_ids: list[int] | None = None
    response_token_ids: list[int] | None = None
    response_logprobs: list[float] | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Trajectory:
    """A whole episode; `reward` is the episode return used by GRPO, `resolved` the graded outcome."""

    task_id: str
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    resolved: bool = False
    termination_reason: str = ""
    patch: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return len(self.turns)

    @property
    def summary(self) -> EpisodeSummary:
        """The env's episode summary (``info``), completed from this record where a hand-made or older
        trajectory lacks a field (return, outcome, turns, parse errors)."""
        return EpisodeSummary.from_dict(
            self.info, task_id=self.task_id, episode_return=self.reward, resolved=self.resolved,
            termination_reason=self.termination_reason, patch=self.patch, steps=self.steps,
            parse_errors=sum(1 for turn in self.turns if turn.parse_error))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
