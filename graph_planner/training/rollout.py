"""The local backend's env rollout: the policy under training plays real episodes in real sandboxes.

Each task gets one sandbox; its ``group_size`` episodes run one after another on the same sandbox (PlannerEnv.reset
restores the base tree), so a GRPO group shares everything but the policy's samples.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.episode.turns import Trajectory

log = logging.getLogger(__name__)


def training_data_path(config: RunConfig) -> Path:
    """``paths.dataset_train``, default ``<paths.data_dir>/train.jsonl``."""
    return Path(config.paths.dataset_train or Path(config.paths.data_dir) / "train.jsonl")


def load_training_tasks(config: RunConfig) -> tuple[list[TaskRecord], Path]:
    """Training tasks from ``paths.dataset_train`` (default ``<paths.data_dir>/train.jsonl``)."""
    from graph_planner.data.io import read_task_records

    path = training_data_path(config)
    if not path.exists():
        raise FileNotFoundError(f"training data not found: {path} (run `gp data prepare` or set "
                                f"paths.dataset_train)")
    tasks = read_task_records(path)
    if not tasks:
        raise ValueError(f"{path}: no tasks to train on")
    return tasks, (path if path.is_dir() else path.parent)


def make_env_rollout(config: RunConfig) -> tuple[list[TaskRecord], Any]:
    """``(tasks, rollout_fn)`` for LocalGRPOTrainer: rollout_fn(policy, tasks, group_size) -> trajectories."""
    from graph_planner.agents.factory import make_policy
    from graph_planner.env.assembly import graph_cache, open_env
    from graph_planner.env.episode import run_episode
    from graph_planner.models.chat import PolicyHandleChat

    if config.experiment.agent == "cgm" or config.backends.planner_backend == "rule":
        raise ValueError(f"training.backend=local trains a model policy, but experiment.agent="
                         f"{config.experiment.agent!r} / backends.planner_backend="
                         f"{config.backends.planner_backend!r} select a policy without one: use experiment.agent="
                         "planner with planner_backend toy or hf")
    tasks, dataset_dir = load_training_tasks(config)
    cache = graph_cache(config)
    run_id = f"train-{config.run_name}-{uuid.uuid4().hex[:6]}"

    def rollout_fn(policy: Any, batch: list[TaskRecord], group_size: int) -> list[Trajectory]:
        chat = PolicyHandleChat(policy, config.planner_sampling)
        trajectories: list[Trajectory] = []
        for task in batch:
            with open_env(task, config, dataset_dir, run_id, cache=cache) as env:
                for _ in range(group_size):
                    trajectories.append(run_episode(task, env, make_policy(config, chat)))
            log.info("rollout %s: rewards %s", task.task_id,
                     [round(t.reward, 3) for t in trajectories[-group_size:]])
        return trajectories

    return tasks, rollout_fn
