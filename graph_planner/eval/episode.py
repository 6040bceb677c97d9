"""One eval episode = sandbox + PlannerEnv + policy on one task, turned into a TaskResult row."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.episode.turns import Trajectory
from graph_planner.eval.results import OutcomeCategory, TaskResult

TIMEOUT_REASONS = ("max_steps", "repo_op_limit", "timeout")


def categorise(trajectory: Trajectory) -> OutcomeCategory:
    """Why an episode ended where it did, for the outcome-category plot."""
    if trajectory.info.get("tampered"):
        return "tampered"
    if trajectory.resolved:
        return "resolved"
    stats = trajectory.info.get("patch_stats") or {}
    reason = trajectory.termination_reason
    if any(key in reason for key in TIMEOUT_REASONS):
        return "timeout"
    if not trajectory.patch.strip():
        return "patch_failed" if stats.get("generated") else "no_patch"
    return "unresolved"


def result_from_trajectory(trajectory: Trajectory, seconds: float) -> TaskResult:
    info = trajectory.info
    grading = next((t.info.get("grading") for t in reversed(trajectory.turns) if t.info.get("grading")), None)
    tokens = info.get("tokens") or {}
    return TaskResult(
        instance_id=trajectory.task_id,
        resolved=trajectory.resolved,
        category=categorise(trajectory),
        model_patch=trajectory.patch,
        tests=grading or {},
        steps=trajectory.steps,
        tokens=int(sum(v for v in tokens.values() if isinstance(v, (int, float)))),
        seconds=round(seconds, 3),
        reward=trajectory.reward,
        termination_reason=trajectory.termination_reason,
        tampered=bool(info.get("tampered")),
        tamper_evidence=list(info.get("tamper_evidence") or []),
        info={k: info.get(k) for k in ("patch_stats", "parse_errors", "tests_run", "synthesizer", "diagnostic",
                                       "policy", "repo_ops", "localisation")},
    )


def build_episode_fn(config: RunConfig, dataset_dir: str | Path | None, run_id: str,
                     trajectories_dir: Path | None = None) -> Callable[[TaskRecord], TaskResult]:
    """A thread-safe function running one task; the chat model is loaded once and shared under a lock."""
    from graph_planner.agents.factory import make_chat_model, make_policy
    from graph_planner.env.assembly import graph_cache, open_env
    from graph_planner.env.episode import run_episode
    from graph_planner.env.replay import write_trajectory_jsonl

    needs_chat = config.experiment.agent != "cgm" and config.backends.planner_backend != "rule"
    chat: Any = make_chat_model(config) if needs_chat else None
    if chat is not None and config.backends.planner_backend != "openai":
        chat = _LockedChat(chat)  # one in-process model: generate() calls must not interleave
    cache = graph_cache(config)

    def episode(task: TaskRecord) -> TaskResult:
        started = time.monotonic()
        policy = make_policy(config, chat)
        with open_env(task, config, dataset_dir, run_id, cache=cache) as env:
            trajectory = run_episode(task, env, policy)
        if trajectories_dir is not None:
            write_trajectory_jsonl(trajectories_dir / f"{task.safe_id}.jsonl", trajectory)
        return result_from_trajectory(trajectory, time.monotonic() - started)

    return episode


class _LockedChat:
    """Serialise calls into one in-process model shared by concurrent episodes (HTTP servers batch on their own)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return locked
