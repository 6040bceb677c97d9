"""executor=ray: episodes as Ray tasks spread over the cluster; results stream back as they finish.

Each node runs its own sandboxes. Concurrency per node is capped by Ray's CPU accounting: every episode reserves
``eval.ray_cpus_per_episode`` CPUs, so a node with C CPUs runs at most C / that many episodes at once; the driver
also keeps at most ``eval.batch_size`` x nodes tasks in flight so results stream instead of arriving at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.eval.results import TaskResult

log = logging.getLogger(__name__)


def _episode_on_node(config_dict: dict[str, Any], task_json: str, dataset_dir: str, run_id: str) -> dict[str, Any]:
    """Runs inside a Ray worker: rebuild config + episode function there (nothing unpicklable crosses)."""
    import socket

    from graph_planner.config.schema import RunConfig as _RunConfig
    from graph_planner.eval.episode import build_episode_fn
    from graph_planner.eval.runner import safe_episode

    config = _RunConfig.model_validate(config_dict)
    task = TaskRecord.model_validate_json(task_json)
    result = safe_episode(build_episode_fn(config, dataset_dir, run_id), task)
    result.info["node"] = socket.gethostname()
    return result.model_dump(mode="json")


def iter_ray(tasks: list[TaskRecord], config: RunConfig, dataset_dir: str, run_id: str,
             address: str | None = None) -> Iterator[TaskResult]:
    """Submit one Ray task per episode and yield results in completion order."""
    import ray

    from graph_planner.config.loader import config_to_dict

    if not ray.is_initialized():
        target = address or config.resources.ray_address or "auto"
        try:
            ray.init(address=target, log_to_driver=False)
        except (ConnectionError, RuntimeError) as exc:
            raise ConnectionError(
                f"eval.executor=ray: cannot reach a Ray cluster at {target!r} ({exc}). Start one (`ray start --head`) "
                "or set resources.ray_address / RAY_ADDRESS; Ray >= 2.59 clusters need RAY_AUTH_MODE=token in the "
                "client environment."
            ) from None
    nodes = max(1, len([n for n in ray.nodes() if n.get("Alive")]))
    remote = ray.remote(num_cpus=config.eval.ray_cpus_per_episode, scheduling_strategy="SPREAD",
                        max_retries=0)(_episode_on_node)
    config_dict = config_to_dict(config)
    queue = list(tasks)
    inflight: dict[Any, TaskRecord] = {}
    cap = config.eval.batch_size * nodes
    while queue or inflight:
        while queue and len(inflight) < cap:
            task = queue.pop(0)
            inflight[remote.remote(config_dict, task.model_dump_json(), str(dataset_dir), run_id)] = task
        ready, _ = ray.wait(list(inflight), num_returns=1)
        for ref in ready:
            task = inflight.pop(ref)
            try:
                yield TaskResult.model_validate(ray.get(ref))
            except Exception as exc:  # noqa: BLE001 - a lost worker is recorded, not fatal to the run
                log.error("ray episode for %s failed: %s", task.task_id, exc)
                yield TaskResult(instance_id=task.task_id, status="error", category="sandbox_error",
                                 error=f"ray: {type(exc).__name__}: {exc}")
