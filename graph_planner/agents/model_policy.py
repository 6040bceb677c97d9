"""The model policy: a chat model (OpenAI-compatible server or local HF) answers each observation with one action.

Prompt = the system prompt (tools + protocol), the first observation (the issue), then the last
``env.history_turns`` turns as assistant/user pairs. A parse error becomes an invalid-action step, or, with
``env.use_rule_fallback``, the rule policy's action; either way the decision carries the error so it is counted.
"""

from __future__ import annotations

from typing import Any

from graph_planner.agents import Policy, PolicyDecision
from graph_planner.config.schema import SamplingConfig
from graph_planner.episode.actions import action_tool_schemas
from graph_planner.episode.turns import Turn
from graph_planner.episode.wire import ActionParseError, parse_action_detailed, render_action, system_prompt
from graph_planner.models.chat import ChatModel


class ModelPolicy:
    """Asks ``chat`` for one action per turn; ``fallback`` (a rule policy) answers when parsing fails."""

    name = "model"

    def __init__(self, chat: ChatModel, sampling: SamplingConfig | None = None, history_turns: int = 6,
                 fallback: Policy | None = None) -> None:
        self.chat = chat
        self.sampling = sampling
        self.history_turns = history_turns
        self.fallback = fallback
        self._first_observation = ""
        self._system = system_prompt()

    def reset(self) -> None:
        self._first_observation = ""
        if self.fallback is not None:
            self.fallback.reset()

    def build_messages(self, obs_text: str, history: list[Turn]) -> list[dict[str, Any]]:
        if not history:
            self._first_observation = obs_text
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self._system},
            {"role": "user", "content": self._first_observation or obs_text},
        ]
        kept = history[-self.history_turns:] if self.history_turns else []
        if len(kept) < len(history):
            messages[-1]["content"] += f"\n\n({len(history) - len(kept)} earlier turn(s) omitted)"
        for turn in kept:
            messages.append({"role": "assistant", "content": turn.response_text})
            messages.append({"role": "user", "content": turn.observation})
        return messages

    def act(self, obs_text: str, obs: dict[str, Any], history: list[Turn]) -> PolicyDecision:
        messages = self.build_messages(obs_text, history)
        tools = action_tool_schemas() if self.chat.supports_tools else None
        response = self.chat.chat(messages, tools=tools, sampling=self.sampling)
        decision = PolicyDecision(
            raw_output=response.message(), action=None, messages=messages,
            prompt_token_ids=response.prompt_token_ids, response_token_ids=response.response_token_ids,
            response_logprobs=response.response_logprobs, prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens, finish_reason=response.finish_reason,
        )
        try:
            parsed = parse_action_detailed(decision.raw_output)
        except ActionParseError as exc:
            decision.parse_error = exc
            decision.response_text = response.text
            if self.fallback is not None:
                fallback = self.fallback.act(obs_text, obs, history)
                decision.action, decision.used_fallback = fallback.action, True
            return decision
        decision.action = parsed.action
        # tool calls are kept in history as their canonical text form, so any chat template can render them
        decision.response_text = response.text if parsed.source == "text" else render_action(parsed.action)
        return decision
