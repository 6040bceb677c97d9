"""GraphPlannerRLLMAgent: rLLM's ``BaseAgent`` speaking Graph Planner's action protocol (one JSON action per
turn, the same system prompt as the local ModelPolicy).

The conversation is system prompt, then the env's first observation (issue + node ids), then assistant/user
pairs, never trimmed: rLLM's token mode requires each step's messages to extend the previous step's
(``Trajectory.is_cumulative``). The agent records the parsed action for reading, but hands the env the raw
reply, so the env parses it once and applies ``env.format_penalty`` exactly as in every other runner.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from graph_planner.episode.actions import action_to_dict
from graph_planner.episode.wire import ActionParseError, parse_action_detailed, system_prompt
from graph_planner.integrations.rllm.compat import Action, BaseAgent, Step, Trajectory

_THINK = re.compile(r"^\s*<think>(.*?)</think>", re.DOTALL)


def _response_text(response: Any) -> str:
    """rLLM 0.2.x passes the reply text; later versions a ModelOutput with ``.text``."""
    if isinstance(response, str):
        return response
    text = getattr(response, "text", None)
    return text if isinstance(text, str) else str(response)


class GraphPlannerRLLMAgent(BaseAgent):
    """``reset`` / ``update_from_env`` / ``update_from_model`` / ``chat_completions`` / ``trajectory``."""

    def __init__(self, system_prompt_text: str | None = None, **kwargs: Any) -> None:
        self._system = system_prompt_text or system_prompt()
        self.reset()

    def reset(self) -> None:
        self._trajectory = Trajectory(name="graph_planner")
        self.messages: list[dict[str, str]] = [{"role": "system", "content": self._system}]
        self._pending: Any = None

    @property
    def chat_completions(self) -> list[dict[str, str]]:
        return self.messages

    @property
    def trajectory(self) -> Any:
        return self._trajectory

    def update_from_env(self, observation: Any, reward: float, done: bool, info: dict, **kwargs: Any) -> None:
        """Settle the previous step (its reward, done and info) and show the observation as the next user turn."""
        steps = self._trajectory.steps
        if steps:
            prior = steps[-1]
            prior.reward, prior.done = float(reward), bool(done)
            prior.info = {**prior.info, **(info or {})}
            self._trajectory.reward = sum(s.reward for s in steps)
        text = observation if isinstance(observation, str) else str(observation)
        self.messages.append({"role": "user", "content": text})
        self._pending = Step(observation=text)

    def update_from_model(self, response: Any, **kwargs: Any) -> Any:
        """Record the reply as a step and return ``Action(action=<the reply text>)`` for ``env.step``."""
        text = _response_text(response)
        step = self._pending if self._pending is not None else Step()
        self._pending = None
        think = _THINK.match(text)
        step.thought = think.group(1).strip() if think else ""
        step.model_response = text
        try:
            step.action = action_to_dict(parse_action_detailed(text).action)
        except ActionParseError as exc:
            step.action = None
            step.info = {**step.info, "parse_error": exc.code}
        self.messages.append({"role": "assistant", "content": text})
        step.chat_completions = copy.deepcopy(self.messages)
        self._trajectory.steps.append(step)
        return Action(action=text)
