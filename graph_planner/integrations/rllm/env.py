"""GraphPlannerRLLMEnv: rLLM's ``BaseEnv`` over one PlannerEnv (one sandbox per env instance).

``from_dict`` takes what rLLM passes it: the registered row (``graph_planner.data.registry`` writes the TaskRecord
JSON under ``task``) merged with ``env_args``, which must name the run config YAML (``run_config_path``) and may
name the ``dataset_dir`` anchoring the task's repo path. Rewards are the env's own step rewards; rLLM sums them
into the trajectory reward, which equals the episode return of every other runner.

rLLM 0.2.x calls ``close`` only when an episode ends normally (an exception or its 7200 s timeout skips it), so the
env also closes its sandbox as soon as the episode is done; ``close`` is idempotent and ``reset`` reopens one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.env.assembly import build_env
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.episode.summary import EpisodeSummary
from graph_planner.integrations.episode_setup import (
    RowError,
    dataset_dir_for,
    load_run_config_file,
    row_dict,
    task_from_row,
)
from graph_planner.integrations.rllm.compat import Action, BaseEnv


class GraphPlannerRLLMEnv(BaseEnv):
    """``from_dict`` / ``reset`` / ``step`` / ``close`` / ``is_multithread_safe``."""

    def __init__(self, task: TaskRecord, config: RunConfig, dataset_dir: str | Path | None = None,
                 run_id: str | None = None) -> None:
        self.task = task
        self.config = config
        self.dataset_dir = dataset_dir
        self.run_id = run_id or f"rllm-{config.run_name}"
        self._env: PlannerEnv | None = None
        #: The finished episode's summary, built by the env (``info["episode"]`` of the last step is its dict).
        self.summary: EpisodeSummary | None = None

    @staticmethod
    def from_dict(info: dict | str) -> GraphPlannerRLLMEnv:
        row = row_dict(info)
        config_path = row.get("run_config_path")
        if not config_path:
            raise RowError("GraphPlannerRLLMEnv.from_dict: no run_config_path; pass the run config YAML in env_args "
                           "(e.g. rllm.env.env_args.run_config_path=/abs/path/run_config.yaml)")
        config = load_run_config_file(config_path)
        if "task" not in row and row.get("ds_json"):  # seed 002: env.env_args.ds_json names an R2E-Gym row
            from graph_planner.data.sources.seed_rows import task_from_ds_json

            task = task_from_ds_json(str(row["ds_json"]), int(row.get("max_steps") or config.env.max_steps))
            return GraphPlannerRLLMEnv(task, config, None, run_id=row.get("run_id"))
        task = task_from_row(row)
        return GraphPlannerRLLMEnv(task, config, dataset_dir_for(task, config, row), run_id=row.get("run_id"))

    @property
    def planner_env(self) -> PlannerEnv | None:
        """The live PlannerEnv (None before ``reset`` and after the episode closed its sandbox)."""
        return self._env

    def reset(self) -> tuple[str, dict[str, Any]]:
        """Start (or restore) the sandbox and return the first observation (issue + repository outline)."""
        if self._env is None:
            self._env = build_env(self.task, self.config, self.dataset_dir, self.run_id)
        text, obs = self._env.reset()
        self.summary = None
        return text, {"obs": obs, "task_id": self.task.task_id, "max_steps": self._env.max_steps}

    def step(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        """One planner action (the model's reply text, a parsed action or an ``Action`` wrapping either)."""
        if self._env is None:
            raise RuntimeError(f"task {self.task.task_id}: call reset() before step()")
        if isinstance(action, Action):
            action = action.action
        result = self._env.step(action)
        info = {**result.info, "obs": result.obs}
        if result.done:
            self.summary = self._env.summary
            self.close()
        return result.observation, result.reward, result.done, info

    def close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            env.sandbox.close()

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Seed 002's BaseEnv ``seed``: rLLM's BaseEnv has none (reference/rllm.md), and this env draws no random
        numbers (tools, sandbox and grading are deterministic), so it only records the value (gym's return)."""
        self._seed = seed
        return [seed]

    @staticmethod
    def is_multithread_safe() -> bool:
        """Each instance owns its sandbox; rLLM runs env calls of different instances in a thread pool."""
        return True
