"""The local backend's env rollout: the policy under training plays real episodes in real sandboxes.

With ``parallel.parallel_agents`` > 1 the step's episodes play that many at a time, each in its own sandbox, their
generations batched (:func:`play_concurrently`); with 1, each task gets one sandbox and its ``group_size`` episodes run
one after another on it (PlannerEnv.reset restores the base tree). Either way a GRPO group shares everything but the
policy's samples.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from graph_planner.config.schema import PathsConfig, RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.episode.turns import Trajectory
from graph_planner.termination import leave_pool

log = logging.getLogger(__name__)


def training_data_path(paths: PathsConfig) -> Path:
    """``paths.dataset_train``, default ``<paths.data_dir>/train.jsonl``."""
    return Path(paths.dataset_train or Path(paths.data_dir) / "train.jsonl")


def load_training_tasks(path: str | Path, origin: str = "paths.dataset_train") -> tuple[list[TaskRecord], Path]:
    """The tasks of one prepared split file (or dir) and the directory their ``repo_path`` is relative to;
    ``origin`` names where ``path`` came from, for the error when it is missing."""
    from graph_planner.data.io import read_task_records

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"task data not found: {path} (run `gp data prepare` or fix {origin})")
    tasks = read_task_records(path)
    if not tasks:
        raise ValueError(f"{path}: no tasks to train on")
    return tasks, (path if path.is_dir() else path.parent)


def rollout_concurrency(config: RunConfig) -> int:
    """Episodes played at once: ``parallel.parallel_agents``, within the sandbox slots (``workflow_parallel``)."""
    return max(1, min(config.parallel.parallel_agents, config.parallel.workflow_parallel))


def play_concurrently(play: Callable[[TaskRecord, Any], Trajectory], policy: Any, config: RunConfig,
                      episodes: list[TaskRecord], concurrency: int) -> list[Trajectory]:
    """Play ``episodes`` (tasks, a task once per group member) ``concurrency`` at a time, each in its own thread
    and sandbox, their generations batched in lockstep rounds (:mod:`~graph_planner.training.local.batched_generation`).
    Returns the trajectories in episode order; the first episode error is raised once its chunk has finished."""
    from graph_planner.models.chat import PolicyHandleChat
    from graph_planner.training.local.batched_generation import GenerationBatcher

    trajectories: list[Trajectory] = []
    for start in range(0, len(episodes), concurrency):
        chunk = episodes[start:start + concurrency]
        batcher = GenerationBatcher(policy, len(chunk))

        def member(i: int) -> Trajectory:
            try:
                return play(chunk[i], PolicyHandleChat(batcher.member(i), config.planner_sampling))
            finally:
                batcher.leave(i)

        # one thread per member (a round waits for all of them); leaving the pool waits for every member, so the
        # first error map() raises comes after the whole chunk finished
        # (a signal leaves at once: graph_planner.termination.leave_pool)
        with leave_pool(ThreadPoolExecutor(max_workers=len(chunk), thread_name_prefix=f"rollout-{start}")) as pool:
            trajectories.extend(pool.map(member, range(len(chunk))))
    return trajectories


def make_env_rollout(config: RunConfig, dataset: str | Path | None = None) -> tuple[list[TaskRecord], Any]:
    """``(tasks, rollout_fn)`` for LocalGRPOTrainer: rollout_fn(policy, tasks, group_size) -> trajectories. The
    tasks are ``dataset``'s (the learning report plays each split), else the training set's."""
    from graph_planner.agents.factory import make_policy
    from graph_planner.env.assembly import graph_cache, open_env
    from graph_planner.env.episode import run_episode
    from graph_planner.models.chat import PolicyHandleChat

    if config.experiment.agent == "cgm" or config.backends.planner_backend == "rule":
        raise ValueError(f"training.backend=local trains a model policy, but experiment.agent="
                         f"{config.experiment.agent!r} / backends.planner_backend="
                         f"{config.backends.planner_backend!r} select a policy without one: use experiment.agent="
                         "planner with planner_backend toy or hf")
    tasks, dataset_dir = (load_training_tasks(dataset, "the dataset played") if dataset is not None
                          else load_training_tasks(training_data_path(config.paths)))
    cache = graph_cache(config)
    run_id = f"train-{config.run_name}-{uuid.uuid4().hex[:6]}"

    concurrency = rollout_concurrency(config)

    def play(task: TaskRecord, chat: Any) -> Trajectory:
        with open_env(task, config, dataset_dir, run_id, cache=cache) as env:
            return run_episode(task, env, make_policy(config, chat))

    def rollout_fn(policy: Any, batch: list[TaskRecord], group_size: int) -> list[Trajectory]:
        if concurrency > 1:
            trajectories = play_concurrently(play, policy, config, [t for t in batch for _ in range(group_size)],
                                             concurrency)
        else:  # one sandbox per task, its episodes one after another (PlannerEnv.reset restores the base tree)
            chat = PolicyHandleChat(policy, config.planner_sampling)
            trajectories = []
            for task in batch:
                with open_env(task, config, dataset_dir, run_id, cache=cache) as env:
                    trajectories.extend(run_episode(task, env, make_policy(config, chat)) for _ in range(group_size))
        for i, task in enumerate(batch):
            log.info("rollout %s: rewards %s", task.task_id,
                     [round(t.reward, 3) for t in trajectories[i * group_size:(i + 1) * group_size]])
        return trajectories

    return tasks, rollout_fn
