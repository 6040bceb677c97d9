"""Submit the verl training run as a Ray job: GPU check, runtime env with the project, deadline, streamed logs.

Exit codes: 0 the job SUCCEEDED; 1 it FAILED, was STOPPED or passed ``resources.job_deadline_s``; 2 it was refused
before submission (cluster unreachable, token auth missing, not enough GPUs).
Auth: Ray 2.60 clusters use token auth; the client honours Ray's own ``RAY_AUTH_MODE=token`` with
``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH`` (default ``~/.ray/auth_token``). The address is
``resources.ray_address``, else Ray's ``RAY_ADDRESS``, else a local head started for this job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import graph_planner
from graph_planner.config.schema import RunConfig

log = logging.getLogger(__name__)

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
ENTRY_MODULE = "graph_planner.training.verl_entry"
#: Never shipped to the cluster: environments, data, runs, caches (the 512 MiB upload cap; code only).
UPLOAD_EXCLUDES = [".venv", ".git", ".cache", "runs", "prepared", "outputs", "wandb", ".pytest_cache", ".ruff_cache",
                   ".mypy_cache", "__pycache__", "*.egg-info", "*.parquet", "*.safetensors", "*.bin", "*.pt",
                   "*.tar", "*.tar.gz", "*.zip"]


class ClusterRefused(RuntimeError):
    """The job was not submitted; the message says why and what to do."""


def project_root() -> Path:
    return Path(graph_planner.__file__).resolve().parent.parent


def job_runtime_env(config: RunConfig) -> dict[str, Any]:
    """The project code as working_dir (so the job runs this exact code) and a few process settings."""
    env_vars = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    if config.logging.wandb.offline:
        env_vars["WANDB_MODE"] = "offline"
    return {"working_dir": str(project_root()), "excludes": list(UPLOAD_EXCLUDES), "env_vars": env_vars}


#: Config paths the job reads or writes; made absolute, because the job runs in an unpacked copy of the project.
_WRITTEN_PATHS = ("logging.output_dir", "paths.cache_dir", "data.output_dir")
_READ_PATHS = ("paths.data_dir", "paths.dataset_train", "paths.dataset_val", "paths.dataset_eval",
               "paths.planner_model", "paths.planner_tokenizer", "training.resume_from")


def write_job_config(config: RunConfig) -> Path:
    """Write the run config for the job with absolute paths (``<run_dir>/verl/job_config.yaml``); return its path.

    Paths the job writes (run dir, caches) are always made absolute; paths it reads only when they exist here
    (a hub id like ``Qwen/Qwen3-14B`` stays as it is). The cluster must see the same filesystem paths.
    """
    from graph_planner.config.loader import dump_config_yaml

    job = config.model_copy(deep=True)
    for dotted in (*_WRITTEN_PATHS, *_READ_PATHS):
        section, name = dotted.split(".")
        value = getattr(getattr(job, section), name)
        if not value or value == "auto" or Path(value).is_absolute():
            continue
        if dotted in _WRITTEN_PATHS or Path(value).exists():
            setattr(getattr(job, section), name, str(Path(value).resolve()))
    run_dir = Path(job.logging.output_dir) / job.run_name
    path = run_dir / "verl" / "job_config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_config_yaml(job), encoding="utf-8")
    return path


def job_entrypoint(python: str, entrypoint_args: Sequence[str]) -> str:
    return shlex.join([python, "-m", ENTRY_MODULE, *entrypoint_args])


def connect(address: str):  # -> JobSubmissionClient
    """A JobSubmissionClient for ``address``; unreachable or unauthenticated clusters raise ClusterRefused."""
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except Exception as exc:  # noqa: BLE001 - ray raises ConnectionError / AuthenticationError / RuntimeError
        text = str(exc)
        if "auth" in text.lower() or "token" in text.lower():
            raise ClusterRefused(
                f"Ray cluster at {address} refused the client: {text.splitlines()[0]}. It uses token auth: set "
                "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH / ~/.ray/auth_token)") from None
        raise ClusterRefused(f"cannot reach the Ray dashboard at {address}: {text.splitlines()[0] if text else exc!r}."
                             " Set resources.ray_address (or RAY_ADDRESS) to http://<head>:8265") from None


_connect = connect  # the name tasks/training.py used first


def cluster_gpus(dashboard_address: str, wait_s: float = 30.0) -> float:
    """Total GPUs of the cluster's alive nodes (Ray state API over the dashboard)."""
    from ray.util.state import list_nodes

    deadline = time.monotonic() + wait_s
    while True:
        nodes = [n for n in list_nodes(address=dashboard_address, detail=True) if n.state == "ALIVE"]
        if nodes or time.monotonic() > deadline:  # a just-started head registers its node a moment later
            return float(sum((n.resources_total or {}).get("GPU", 0.0) for n in nodes))
        time.sleep(0.5)


def check_cluster_gpus(config: RunConfig, dashboard_address: str) -> None:
    """Refuse a cluster with fewer GPUs than the verl trainer layout needs."""
    from graph_planner.training.verl_config import verl_gpu_layout

    layout = verl_gpu_layout(config)
    have = cluster_gpus(dashboard_address)
    if have < layout.total:
        raise ClusterRefused(
            f"Ray cluster at {dashboard_address} has {have:g} GPUs; the verl backend needs {layout.total} "
            f"({layout.nnodes} node(s) x {layout.n_gpus_per_node} GPU(s), from resources.num_gpus / num_nodes and "
            "parallel.tensor_parallel_cgm). Point resources.ray_address at a GPU cluster, or use "
            "training.backend=local on this machine (--dry-run validates the job without GPUs)")


@contextlib.contextmanager
def ray_cluster(config: RunConfig) -> Iterator[tuple[str, bool]]:
    """Yield (address, started_here): the configured cluster, or a local head living as long as the block."""
    address = config.resources.ray_address or os.environ.get("RAY_ADDRESS")
    if address:
        yield address, False
        return
    import ray

    log.info("no resources.ray_address / RAY_ADDRESS: starting a local Ray head for this job")
    context = ray.init(num_cpus=config.resources.ray_num_cpus, include_dashboard=True, dashboard_host="127.0.0.1",
                       configure_logging=False)
    try:
        yield f"http://{context.dashboard_url}", True
    finally:
        ray.shutdown()


async def _tail(client: Any, job_id: str, sink: Callable[[str], None]) -> None:
    async for chunk in client.tail_job_logs(job_id):
        for line in chunk.splitlines():
            sink(line)


def follow_job(client: Any, job_id: str, deadline_s: float, sink: Callable[[str], None]) -> int:
    """Stream the job's logs until it ends or the deadline passes (then stop it); map its status to an exit code."""
    started = time.monotonic()
    try:
        asyncio.run(asyncio.wait_for(_tail(client, job_id, sink), timeout=deadline_s))
    except (asyncio.TimeoutError, TimeoutError):
        log.error("job %s passed its deadline of %.0f s (resources.job_deadline_s); stopping it", job_id, deadline_s)
        client.stop_job(job_id)
        _wait_terminal(client, job_id, 30.0)
        return EXIT_FAILED
    status = _wait_terminal(client, job_id, max(5.0, deadline_s - (time.monotonic() - started)))
    if status == "SUCCEEDED":
        return EXIT_SUCCEEDED
    info = client.get_job_info(job_id)
    log.error("job %s ended %s: %s", job_id, status, info.message or "(no message)")
    return EXIT_FAILED


def _wait_terminal(client: Any, job_id: str, timeout_s: float) -> str:
    end = time.monotonic() + timeout_s
    status = str(client.get_job_status(job_id))
    while status not in TERMINAL and time.monotonic() < end:
        time.sleep(0.5)
        status = str(client.get_job_status(job_id))
    return status


def submit_training_job(config: RunConfig, entrypoint_args: Sequence[str], dry_run: bool = False,
                        sink: Callable[[str], None] | None = None) -> int:
    """Submit ``python -m graph_planner.training.verl_entry <args>`` and follow it; returns the exit code.

    With ``dry_run`` the entrypoint gets ``--dry-run`` (config, data and agent-loop checks, no training) and the
    GPU check is skipped, so the job plumbing can be exercised on a CPU-only cluster.
    """
    sink = sink or (lambda line: print(line, flush=True))
    args = [*entrypoint_args, *(["--dry-run"] if dry_run and "--dry-run" not in entrypoint_args else [])]
    try:
        with ray_cluster(config) as (address, started_here):
            client = connect(address)
            if dry_run:
                log.info("dry run: skipping the GPU check of %s", address)
            else:
                check_cluster_gpus(config, client.get_address())
            python = sys.executable if started_here else config.resources.ray_job_python
            job_id = client.submit_job(
                entrypoint=job_entrypoint(python, args), runtime_env=job_runtime_env(config),
                metadata={"run_name": config.run_name, "dry_run": str(dry_run).lower()},
                submission_id=f"gp-{config.run_name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}",
                entrypoint_num_cpus=0,
            )
            log.info("submitted Ray job %s to %s", job_id, address)
            return follow_job(client, job_id, config.resources.job_deadline_s, sink)
    except ClusterRefused as exc:
        log.error("%s", exc)
        return EXIT_REFUSED
