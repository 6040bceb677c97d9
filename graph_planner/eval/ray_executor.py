"""executor=ray: episodes as Ray tasks spread over the cluster; results stream back as they finish.

Each node runs its own sandboxes. Concurrency per node is capped by Ray's CPU accounting: every episode reserves
``eval.ray_cpus_per_episode`` CPUs, so a node with C CPUs runs at most C / that many episodes at once; the driver
also keeps at most ``eval.batch_size`` x nodes tasks in flight so results stream instead of arriving at the end.

The cluster: ``resources.ray_address`` / ``RAY_ADDRESS`` (a user's cluster, with the user's own Ray auth; token
mode without a token is refused before anything starts), else a private local cluster started for the run with
token auth (a fresh token in a 0700 dir, nothing under ``~/.ray``: :mod:`graph_planner.integrations.ray_auth`),
stopped when the run ends. A Ray already initialised in this process is used as it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.eval.ray_faults import NODE_LOSS_ATTEMPTS, ClusterWatch, node_loss_kind
from graph_planner.eval.results import TaskResult
from graph_planner.integrations.ray_auth import AUTH_VARS, PrivateRayAuth, check_user_auth, user_auth_problem
from graph_planner.integrations.ray_cluster import user_cluster_address

log = logging.getLogger(__name__)
#: How long the driver waits for a result before it probes the cluster again.
WAIT_S = 1.0


def _episode_on_node(config_dict: dict[str, Any], task_json: str, dataset_dir: str, run_id: str) -> dict[str, Any]:
    """Runs inside a Ray worker: rebuild config + episode function there (nothing unpicklable crosses).

    A Ray worker process lives on between tasks and is killed, not exited, when the cluster scales it down, so its
    exit cleanup never runs: the sandbox templates it built are dropped after each task (`gp sandbox reap` removes
    those of a worker killed mid-task). ``info.node`` is the Ray node id (two nodes may share a host).

    The node may not share the driver's disk: the task's kept test output and trajectory are written to a temp dir
    here and travel back as text (``files``: path relative to the eval dir -> content), for the driver to write
    where the local executor writes them."""
    import socket

    import ray

    from graph_planner.config.schema import RunConfig as _RunConfig
    from graph_planner.eval.episode import build_episode_fn
    from graph_planner.eval.runner import safe_episode
    from graph_planner.sandbox.local_copies import drop_templates, owned_temp_dir

    config = _RunConfig.model_validate(config_dict)
    task = TaskRecord.model_validate_json(task_json)
    # owned like a sandbox copy: a worker killed mid-task leaves it to `gp sandbox reap`
    with owned_temp_dir(run_id, task.task_id, "episode-files") as out:
        try:
            result = safe_episode(build_episode_fn(config, dataset_dir, run_id, trajectories_dir=out / TRAJECTORIES,
                                                   eval_dir=out), task)
        finally:
            drop_templates()
        files = {str(path.relative_to(out)): path.read_text(encoding="utf-8", errors="replace")
                 for path in sorted(out.rglob("*")) if path.is_file()}
    result.info["node"] = ray.get_runtime_context().get_node_id()
    result.info["host"] = socket.gethostname()
    return {"row": result.model_dump(mode="json"), "files": files}


#: The eval dir's trajectory folder (the local executor's ``trajectories_dir``).
TRAJECTORIES = "trajectories"


def write_episode_files(eval_dir: Path, files: dict[str, str]) -> None:
    """Write the files a node sent back under ``eval_dir``; a name that would leave it is dropped (logged)."""
    from graph_planner.disk import atomic_write_text

    root = eval_dir.resolve()
    for name, text in files.items():
        target = (eval_dir / name).resolve()
        if not target.is_relative_to(root) or target == root:
            log.warning("ray: dropped an episode file named %r (outside the eval dir)", name)
            continue
        atomic_write_text(target, text)


def cluster_address(config: RunConfig, address: str | None = None) -> str | None:
    """The user's cluster (argument, ``resources.ray_address``, ``RAY_ADDRESS``), None for a private one."""
    return user_cluster_address(config.resources, address)


def executor_problems(config: RunConfig) -> list[str]:
    """Checked before a run starts: a user's cluster in token mode needs the user's token."""
    if config.eval.executor != "ray" or cluster_address(config) is None:
        return []
    problem = user_auth_problem()
    return [f"eval.executor=ray: {problem}"] if problem else []


def check_executor(config: RunConfig) -> None:
    """Raise RayAuthError (a ValueError: `gp eval` exits 2 with one line) for :func:`executor_problems`."""
    from graph_planner.integrations.ray_auth import RayAuthError

    problems = executor_problems(config)
    if problems:
        raise RayAuthError("; ".join(problems))


def _refresh_ray_auth() -> None:
    """Ray caches its auth mode and token per process; re-read them from the environment just set (Ray-internal
    calls: ``ray.init`` has no argument for them)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@contextlib.contextmanager
def ray_session(config: RunConfig, address: str | None = None) -> Iterator[None]:
    """Ray connected for the block: the one already initialised, the user's cluster, or a private local cluster
    with its own token (its processes and this driver read it through Ray's variables, restored afterwards)."""
    import ray

    if ray.is_initialized():
        yield
        return
    target = cluster_address(config, address)
    if target is not None:
        check_user_auth()
        try:
            ray.init(address=target, log_to_driver=False)
        except (ConnectionError, RuntimeError) as exc:
            raise ConnectionError(
                f"eval.executor=ray: cannot reach a Ray cluster at {target!r} ({exc}). Set resources.ray_address / "
                "RAY_ADDRESS to a running cluster, or leave both unset for a private local one; token-auth clusters "
                "need RAY_AUTH_MODE=token with RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH."
            ) from None
        try:
            yield
        finally:
            ray.shutdown()
        return
    auth = PrivateRayAuth.create(prefix="gpevalray-")
    saved = {k: os.environ.get(k) for k in AUTH_VARS}
    for key in AUTH_VARS:
        os.environ.pop(key, None)
    os.environ.update(auth.env())
    try:
        _refresh_ray_auth()
        _init_private(config, auth)
        log.info("eval.executor=ray: a private local Ray cluster (token auth, temp dir %s)", auth.ray_temp_dir)
        yield
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        with contextlib.suppress(Exception):
            _refresh_ray_auth()
        auth.remove()


#: Starts of a private cluster: on a loaded machine Ray's fixed 30 s wait for its raylet can run out once.
PRIVATE_START_TRIES = 2


def _init_private(config: RunConfig, auth: PrivateRayAuth) -> None:
    import ray

    for attempt in range(1, PRIVATE_START_TRIES + 1):
        try:
            ray.init(num_cpus=max(1, config.resources.ray_num_cpus), include_dashboard=False, log_to_driver=False,
                     _temp_dir=str(auth.ray_temp_dir))
            return
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == PRIVATE_START_TRIES:
                raise
            log.warning("eval.executor=ray: the private Ray cluster did not start (%s); starting it again", exc)
            ray.shutdown()


def iter_ray(tasks: list[TaskRecord], config: RunConfig, dataset_dir: str, run_id: str, eval_dir: Path,
             address: str | None = None) -> Iterator[TaskResult]:
    """Submit one Ray task per episode and yield results in completion order; each task's test output and
    trajectory are written under ``eval_dir``, as the local executor writes them."""
    with ray_session(config, address):
        yield from _iter_on_cluster(tasks, config, dataset_dir, run_id, eval_dir)


def _iter_on_cluster(tasks: list[TaskRecord], config: RunConfig, dataset_dir: str,
                     run_id: str, eval_dir: Path) -> Iterator[TaskResult]:
    import ray

    from graph_planner.config.loader import config_to_dict

    nodes = max(1, len([n for n in ray.nodes() if n.get("Alive")]))
    # retries are ours, not Ray's: a lost episode is played again from the start on a live node, and a task whose
    # node keeps dying ends as an error row instead of being retried without bound
    remote = ray.remote(num_cpus=config.eval.ray_cpus_per_episode, scheduling_strategy="SPREAD",
                        max_retries=0)(_episode_on_node)
    config_dict = config_to_dict(config)
    watch = ClusterWatch.of_driver()
    names = _NodeNames()
    queue = list(tasks)
    inflight: dict[Any, TaskRecord] = {}
    attempts: Counter[str] = Counter()
    losses: dict[str, list[str]] = {}
    cap = config.eval.batch_size * nodes
    while queue or inflight:
        if watch.check(len(queue) + len(inflight)):  # raises ClusterLost when the head stays unreachable
            while queue and len(inflight) < cap:
                task = queue.pop(0)
                attempts[task.task_id] += 1
                inflight[remote.remote(config_dict, task.model_dump_json(), str(dataset_dir), run_id)] = task
        ready, _ = ray.wait(list(inflight), num_returns=1, timeout=WAIT_S) if inflight else ([], [])
        if not inflight:
            time.sleep(WAIT_S)
        for ref in ready:
            task = inflight.pop(ref)
            try:
                sent = ray.get(ref)
                row = TaskResult.model_validate(sent["row"])
            except Exception as exc:  # noqa: BLE001 - a lost worker is retried or recorded, not fatal to the run
                kind = node_loss_kind(exc)
                if kind is not None:
                    losses.setdefault(task.task_id, []).append(kind)
                    if not watch.healthy:  # the head is going: the run ends, this attempt does not count
                        attempts[task.task_id] -= 1
                    if attempts[task.task_id] < NODE_LOSS_ATTEMPTS:
                        log.warning("ray: %s lost its node (%s, attempt %d of %d); playing it again on a live node",
                                    task.task_id, kind, attempts[task.task_id], NODE_LOSS_ATTEMPTS)
                        queue.insert(0, task)
                        continue
                log.error("ray episode for %s failed: %s", task.task_id, exc)
                yield TaskResult(instance_id=task.task_id, status="error", category="sandbox_error",
                                 error=f"ray: {type(exc).__name__}: {exc}",
                                 info={"attempts": attempts[task.task_id], "node_losses": losses.get(task.task_id, [])})
                continue
            write_episode_files(eval_dir, sent["files"])
            row.info["node_name"] = names.name(row.info.get("node"))
            if task.task_id in losses:
                row.info["attempts"] = attempts[task.task_id]
                row.info["node_losses"] = losses[task.task_id]
            yield row


class _NodeNames:
    """Ray node id -> node name (``ray start --node-name``; Ray's default is the node's IP)."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def name(self, node_id: Any) -> str | None:
        import ray

        if not isinstance(node_id, str):
            return None
        if node_id not in self._names:
            self._names.update({n["NodeID"]: str(n.get("NodeName") or "") for n in ray.nodes()})
        return self._names.get(node_id) or None
