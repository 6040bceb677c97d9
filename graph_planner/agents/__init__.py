"""Planner agents: the `Policy` contract, the rule policy (no model) and the model policy over a chat model.

A policy sees the observation text, its structured form and the turns so far, and answers one decision:
what the model said, the action parsed from it (or None), and the parse error when there was one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from graph_planner.episode.actions import ActionBase
    from graph_planner.episode.turns import Turn
    from graph_planner.episode.wire import ActionParseError


@dataclass
class PolicyDecision:
    """One policy turn. ``action`` is None when the output could not be parsed and no fallback was used."""

    raw_output: Any
    action: ActionBase | None
    parse_error: ActionParseError | None = None
    used_fallback: bool = False
    response_text: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    prompt_token_ids: list[int] | None = None
    response_token_ids: list[int] | None = None
    response_logprobs: list[float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: "length" when the model's response was cut at the token limit (OpenAI's finish_reason), else "stop".
    finish_reason: str = "stop"


@runtime_checkable
class Policy(Protocol):
    """Chooses the next action; ``reset`` is called at the start of every episode."""

    name: str

    def reset(self) -> None: ...

    def act(self, obs_text: str, obs: dict[str, Any], history: list[Turn]) -> PolicyDecision: ...


__all__ = ["Policy", "PolicyDecision"]
