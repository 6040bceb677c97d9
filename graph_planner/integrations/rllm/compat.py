"""rLLM 0.2.x base classes and data types: rLLM's own when it is importable, else local stand-ins with the same
names, fields and method signatures (rllm-org/rllm v0.2.1.post1: ``rllm/agents/agent.py``,
``rllm/environments/base/base_env.py``), so the adapters import and run without rLLM, which is not on PyPI.

The stand-ins carry no rLLM behaviour beyond what the adapters and a reader of their trajectories need.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LocalAction:
    """rLLM ``Action``: what ``update_from_model`` hands the engine, which passes ``.action`` to ``env.step``."""

    action: Any = None


@dataclass
class LocalStep:
    """rLLM 0.2.x ``Step``: one model turn; ``reward``/``done`` are filled in after the env answered."""

    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    chat_completions: list[dict[str, str]] = field(default_factory=list)
    observation: Any = None
    thought: str = ""
    action: Any = None
    model_response: str = ""
    model_output: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    done: bool = False
    mc_return: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_ids": self.prompt_ids, "response_ids": self.response_ids, "logprobs": self.logprobs,
            "chat_completions": self.chat_completions, "observation": self.observation, "thought": self.thought,
            "action": self.action.action if isinstance(self.action, LocalAction) else self.action,
            "model_response": self.model_response, "model_output": None, "info": self.info, "reward": self.reward,
            "done": self.done, "mc_return": self.mc_return,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LocalStep:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "model_output"}
        return cls(**known)


@dataclass
class LocalTrajectory:
    """rLLM 0.2.x ``Trajectory``: the steps of one episode; rLLM's engine sets ``reward`` to their sum."""

    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    name: str = "agent"
    task: Any = None
    steps: list[LocalStep] = field(default_factory=list)
    reward: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"uid": self.uid, "name": self.name, "task": self.task, "steps": [s.to_dict() for s in self.steps],
                "reward": float(self.reward), "info": self.info}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LocalTrajectory:
        return cls(uid=data.get("uid", str(uuid.uuid4())), name=data.get("name", "agent"), task=data.get("task"),
                   steps=[LocalStep.from_dict(s) for s in data.get("steps", [])], reward=data.get("reward", 0.0),
                   info=data.get("info", {}))

    def is_cumulative(self) -> bool:
        """True when each step's chat_completions extends the previous step's (one growing conversation)."""
        for prev, cur in zip(self.steps, self.steps[1:]):
            if cur.chat_completions[: len(prev.chat_completions)] != prev.chat_completions:
                return False
        return True


class LocalBaseAgent(ABC):
    """rLLM 0.2.x ``BaseAgent``."""

    @property
    def chat_completions(self) -> list[dict[str, str]]:
        return []

    @property
    def trajectory(self) -> Any:
        return LocalTrajectory()

    def update_from_env(self, observation: Any, reward: float, done: bool, info: dict, **kwargs: Any) -> None:
        raise NotImplementedError("Subclasses must implement this method if using AgentExecutionEngine")

    def update_from_model(self, response: str, **kwargs: Any) -> Any:
        raise NotImplementedError("Subclasses must implement this method if using AgentExecutionEngine")

    @abstractmethod
    def reset(self) -> None:
        """Clear the agent's history at the start of an episode."""

    def get_current_state(self) -> Any:
        steps = self.trajectory.steps
        return steps[-1] if steps else None


class LocalBaseEnv(ABC):
    """rLLM 0.2.x ``BaseEnv`` (gym-style 4-tuple ``step``; no ``seed``)."""

    @property
    def idx(self) -> Any:
        return getattr(self, "_idx", None)

    @idx.setter
    def idx(self, value: Any) -> None:
        self._idx = value

    @abstractmethod
    def reset(self) -> tuple[Any, dict]:
        """(observation, info)."""

    @abstractmethod
    def step(self, action: Any) -> tuple[Any, float, bool, dict]:
        """(observation, reward, done, info)."""

    def close(self) -> None:
        return None

    @staticmethod
    @abstractmethod
    def from_dict(info: dict) -> LocalBaseEnv:
        """Build an env from a dataset row (``extra_info`` merged with ``env_args``)."""
        raise NotImplementedError("Subclasses must implement the 'from_dict' static method.")

    @staticmethod
    def is_multithread_safe() -> bool:
        return True


try:
    from rllm.agents.agent import Action, BaseAgent, Step, Trajectory
    from rllm.environments.base.base_env import BaseEnv

    RLLM_AVAILABLE = True
except ImportError:
    Action, BaseAgent, Step, Trajectory = LocalAction, LocalBaseAgent, LocalStep, LocalTrajectory  # type: ignore[misc]
    BaseEnv = LocalBaseEnv  # type: ignore[misc]
    RLLM_AVAILABLE = False

__all__ = ["RLLM_AVAILABLE", "Action", "BaseAgent", "BaseEnv", "Step", "Trajectory"]
