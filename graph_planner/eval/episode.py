"""One eval episode = sandbox + PlannerEnv + policy on one task, turned into a TaskResult row."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.disk import atomic_write_text
from graph_planner.episode.summary import EpisodeSummary
from graph_planner.episode.turns import Trajectory
from graph_planner.eval.results import OutcomeCategory, TaskResult

TIMEOUT_REASONS = ("max_steps", "repo_op_limit", "timeout")


def categorise(summary: EpisodeSummary) -> OutcomeCategory:
    """Why an episode ended where it did, for the outcome-category plot."""
    if summary.tampered:
        return "tampered"
    if summary.resolved:
        return "resolved"
    if any(key in summary.termination_reason for key in TIMEOUT_REASONS):
        return "timeout"
    if not summary.patch.strip():
        return "patch_failed" if (summary.patch_stats or {}).get("generated") else "no_patch"
    return "unresolved"


def result_from_trajectory(trajectory: Trajectory, seconds: float, test_output: str | None = None) -> TaskResult:
    """The eval row of one episode, read from the env's summary; ``test_output``: where the final graded run's
    log was kept (relative to the eval dir), when it was."""
    summary = trajectory.summary
    grading = next((t.info.get("grading") for t in reversed(trajectory.turns) if t.info.get("grading")), None)
    return TaskResult(
        instance_id=summary.task_id,
        resolved=summary.resolved,
        category=categorise(summary),
        model_patch=summary.patch,
        tests=grading or {},
        steps=summary.steps,
        tokens=int(sum(v for v in summary.tokens.values() if isinstance(v, (int, float)))),
        seconds=round(seconds, 3),
        reward=summary.episode_return,
        termination_reason=summary.termination_reason,
        tampered=summary.tampered,
        tamper_evidence=list(summary.tamper_evidence),
        test_output=test_output,
        info={"patch_stats": summary.patch_stats, "parse_errors": summary.parse_errors,
              "tests_run": summary.tests_run, "synthesizer": summary.synthesizer, "diagnostic": summary.diagnostic,
              "policy": summary.policy, "repo_ops": summary.repo_ops, "localisation": summary.localisation,
              "clipped_responses": summary.clipped_responses},
    )


#: Per-instance test output under the eval dir, as the SWE-bench harness keeps ``logs/.../<id>/test_output.txt``.
TEST_OUTPUT = "logs/{safe_id}/test_output.txt"


def write_test_output(eval_dir: Path, task: TaskRecord, summary: EpisodeSummary) -> str | None:
    """Keep the final graded run's log of ``task`` under ``eval_dir``; returns its path relative to it (None
    when the episode ran no graded test: nothing was submitted, or an empty patch)."""
    if not summary.test_output:
        return None
    relative = TEST_OUTPUT.format(safe_id=task.safe_id)
    atomic_write_text(eval_dir / relative, summary.test_output)
    return relative


def build_episode_fn(config: RunConfig, dataset_dir: str | Path | None, run_id: str,
                     trajectories_dir: Path | None = None,
                     eval_dir: Path | None = None) -> Callable[[TaskRecord], TaskResult]:
    """A thread-safe function running one task; the chat model is loaded once and shared under a lock.
    ``eval_dir``: where each task's final test output is kept (:data:`TEST_OUTPUT`)."""
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
        test_output = write_test_output(eval_dir, task, trajectory.summary) if eval_dir is not None else None
        return result_from_trajectory(trajectory, time.monotonic() - started, test_output)

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
