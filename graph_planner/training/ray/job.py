"""The one submission path of the verl training run: prepare -> submit -> follow, on a cluster or a private head.

``run_training_job`` is used by `gp train` and by the Prefect train task (which passes its retried wrapper of
``submit_job``: only the submission is retried). Exit codes: 0 the job SUCCEEDED; 1 it FAILED, was STOPPED, was
interrupted or passed ``resources.job_deadline_s``; 2 it was refused before submission (cluster unreachable,
token auth missing, not enough GPUs, local head did not start).
Auth: Ray 2.60 clusters use token auth; the client honours Ray's own ``RAY_AUTH_MODE=token`` with
``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH`` (default ``~/.ray/auth_token``), and token mode without a token is
refused before anything starts. A private head gets its own fresh token (:mod:`graph_planner.integrations.ray_auth`),
which its clients send as a header. The address is
``resources.ray_address``, else Ray's ``RAY_ADDRESS``, else a private local head started for this job
(:func:`graph_planner.integrations.ray_cluster.user_cluster_address`, the one resolution, eval's too)
(:mod:`graph_planner.training.ray.head`; on a machine without CUDA the job runs verl on CPU through
:mod:`graph_planner.training.verl.cpu`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import graph_planner
from graph_planner import termination
from graph_planner.config.paths import RESOLVED_CONFIG, run_paths
from graph_planner.config.schema import RunConfig
from graph_planner.integrations.ray_auth import RayAuthError, user_auth_problem, user_headers
from graph_planner.integrations.ray_cluster import user_cluster_address
from graph_planner.training.ray.head import (
    MIN_LOGICAL_CPUS,
    LocalRayHead,
    RayHeadError,
    head_headers,
    local_gpu_count,
)

log = logging.getLogger(__name__)

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
ENTRY_MODULE = "graph_planner.training.verl.entry"
VERL_COMPAT_MODULE = "graph_planner.training.verl.compat"
#: The ``hf`` rollout (transformers.generate), registered on every cluster; ``rollout.name=hf`` picks it.
HF_ROLLOUT_MODULE = "graph_planner.training.verl.hf_rollout"
#: Never shipped to the cluster: environments, data, runs, caches (the 512 MiB upload cap; code only).
UPLOAD_EXCLUDES = [".venv", ".git", ".cache", "runs", "prepared", "outputs", "wandb", ".pytest_cache", ".ruff_cache",
                   ".mypy_cache", "__pycache__", "*.egg-info", "*.parquet", "*.safetensors", "*.bin", "*.pt",
                   "*.tar", "*.tar.gz", "*.zip"]


class ClusterRefused(RuntimeError):
    """The job was not submitted; the message says why and what to do."""


def project_root() -> Path:
    return Path(graph_planner.__file__).resolve().parent.parent


#: The verl module whose import warns once for every optional training engine that is not installed.
VERL_OPTIONAL_ENGINES_MODULE = "verl.workers.engine"
#: Imported by ``import verl`` in every verl process of the job (``VERL_USE_EXTERNAL_MODULES``).
SEED_METRIC_NAMES_MODULE = "graph_planner.telemetry.verl_names"


def job_runtime_env(config: RunConfig) -> dict[str, Any]:
    """The project code as working_dir (so the job runs this exact code) and a few process settings.

    ``resources.system_envs`` (ROLL's ``system_envs``) are added to the job's env vars; ours win on a clash.
    """
    from graph_planner.training.verl.telemetry import VERL_METRICS_FILE, telemetry_dir

    env_vars = {"TRL_EXPERIMENTAL_SILENCE": "1",  # verl imports trl.experimental: 2 warning lines a process
                # verl.workers.engine warns for each optional engine it lacks (torchtitan, megatron, ...): 10 lines
                # in every verl process, 60 of a demo run's 1,217; a user's system_envs can turn them back on
                "PYTHONWARNINGS": f"ignore::UserWarning:{VERL_OPTIONAL_ENGINES_MODULE}",
                **config.resources.system_envs, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false",
                # seed 000 section 5: verl's tracker also logs train/kl, train/entropy, ... (telemetry.verl_names);
                # verl 0.9.1 fixes for every platform (training.verl.compat); the hf rollout, CPU or GPU
                "VERL_USE_EXTERNAL_MODULES": f"{SEED_METRIC_NAMES_MODULE},{VERL_COMPAT_MODULE},{HF_ROLLOUT_MODULE}",
                # verl's file logger runs in its TaskRunner actor, which sees the job's env, not the driver's
                "VERL_FILE_LOGGER_PATH": str((telemetry_dir(config) / VERL_METRICS_FILE).resolve())}
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
    run_dir = run_paths(config).run_dir.resolve()  # an unnamed run's <name>-<stamp> dir, recorded for the job
    job.resolved_run_dir, job.resolved_config_path = str(run_dir), str(run_dir / RESOLVED_CONFIG)
    path = run_dir / "verl" / "job_config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_config_yaml(job), encoding="utf-8")
    return path


def job_entrypoint(python: str, entrypoint_args: Sequence[str]) -> str:
    return shlex.join([python, "-m", ENTRY_MODULE, *entrypoint_args])


def user_cluster_auth_problem(config: RunConfig) -> str | None:
    """A user's cluster (``resources.ray_address`` / ``RAY_ADDRESS``) with RAY_AUTH_MODE=token and no token: said
    at once, not after Ray's waits. A private head makes its own token, so the user's token mode needs none."""
    if user_cluster_address(config.resources):
        return user_auth_problem()
    return None


def connect(address: str):  # -> JobSubmissionClient
    """A JobSubmissionClient for ``address``; unreachable or unauthenticated clusters raise ClusterRefused."""
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address, headers=head_headers(address) or user_headers() or None)
    except Exception as exc:  # noqa: BLE001 - ray raises ConnectionError / AuthenticationError / RuntimeError
        text = str(exc)
        if "auth" in text.lower() or "token" in text.lower():
            raise ClusterRefused(
                f"Ray cluster at {address} refused the client: {text.splitlines()[0]}. It uses token auth: set "
                "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH / ~/.ray/auth_token)") from None
        raise ClusterRefused(f"cannot reach the Ray dashboard at {address}: {text.splitlines()[0] if text else exc!r}."
                             " Set resources.ray_address (or RAY_ADDRESS) to http://<head>:8265") from None


def cluster_gpus(dashboard_address: str, wait_s: float = 30.0) -> float:
    """Total GPUs of the cluster's alive nodes (Ray state API over the dashboard)."""
    from ray.util.state import StateApiClient
    from ray.util.state.common import ListApiOptions, StateResource

    auth = head_headers(dashboard_address) or user_headers()
    client = StateApiClient(address=dashboard_address,
                            headers={"Content-Type": "application/json", **auth} if auth else None)
    deadline = time.monotonic() + wait_s
    while True:
        listed = client.list(StateResource.NODES, options=ListApiOptions(detail=True), raise_on_missing_output=True)
        nodes = [n for n in listed if n.state == "ALIVE"]
        if nodes or time.monotonic() > deadline:  # a just-started head registers its node a moment later
            return float(sum((n.resources_total or {}).get("GPU", 0.0) for n in nodes))
        time.sleep(0.5)


def check_cluster_gpus(config: RunConfig, dashboard_address: str) -> None:
    """Refuse a cluster with fewer GPUs than the verl trainer layout needs."""
    from graph_planner.training.verl.config import verl_gpu_layout

    layout = verl_gpu_layout(config)
    have = cluster_gpus(dashboard_address)
    if have < layout.total:
        raise ClusterRefused(
            f"Ray cluster at {dashboard_address} has {have:g} GPUs; the verl backend needs {layout.total} "
            f"({layout.nnodes} node(s) x {layout.n_gpus_per_node} GPU(s), from resources.num_gpus / num_nodes and "
            "parallel.tensor_parallel_cgm). Point resources.ray_address at a GPU cluster, or leave it unset to "
            "run on a private local head (--dry-run validates the job without GPUs)")


@dataclass
class Cluster:
    """Where the job goes: a configured cluster, or a private local head started for it (``head``).

    ``cpu_platform``: the local head has no CUDA device, so the job loads :mod:`graph_planner.training.verl.cpu`
    (cpu platform, hf rollout) in every verl process.
    """

    address: str
    head: LocalRayHead | None = None
    cpu_platform: bool = False


@contextlib.contextmanager
def _visible_gpus(gpus: list[int] | None) -> Iterator[None]:
    """CUDA_VISIBLE_DEVICES = ``gpus`` while a local Ray head starts (it records the GPUs it may hand out)."""
    if gpus is None:
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpus)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


@contextlib.contextmanager
def ray_cluster(config: RunConfig, run_dir: Path) -> Iterator[Cluster]:
    """The configured cluster (``resources.ray_address`` / ``RAY_ADDRESS``), or a private local head living as
    long as the block (stopped by PID on every exit path, a failed start included)."""
    address = user_cluster_address(config.resources)
    if address:
        yield Cluster(address)
        return
    gpus = local_gpu_count()
    pinned = config.backends.gpus("planner") if gpus else None
    if pinned is not None:  # backends.device_map_planner: the head sees (and hands out) only those GPUs
        gpus = len(pinned)
    head = LocalRayHead(num_cpus=max(MIN_LOGICAL_CPUS, config.resources.ray_num_cpus), num_gpus=gpus or 1,
                        log_path=run_dir / "verl" / "ray_head.log")
    log.info("no resources.ray_address / RAY_ADDRESS: starting a private local Ray head for this job")
    with _visible_gpus(pinned), head:
        yield Cluster(head.dashboard_url, head, cpu_platform=gpus == 0)


@dataclass
class JobSpec:
    """Everything ``submit_job`` sends: built once by ``prepare_job``, so a retried submit sends the same job."""

    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    submission_id: str
    check_gpus: bool


def prepare_job(config: RunConfig, entrypoint_args: Sequence[str], cluster: Cluster, dry_run: bool = False) -> JobSpec:
    """The job for ``cluster``: entrypoint (``--dry-run`` / ``--cpu`` added), runtime env, metadata, submission id."""
    args = list(entrypoint_args)
    if dry_run and "--dry-run" not in args:
        args.append("--dry-run")
    runtime_env = job_runtime_env(config)
    if cluster.cpu_platform:
        from graph_planner.training.verl.cpu import cpu_job_env_vars

        cpu_vars = cpu_job_env_vars()
        modules = [runtime_env["env_vars"].get("VERL_USE_EXTERNAL_MODULES"), cpu_vars.pop("VERL_USE_EXTERNAL_MODULES")]
        runtime_env["env_vars"].update(cpu_vars)
        runtime_env["env_vars"]["VERL_USE_EXTERNAL_MODULES"] = ",".join(m for m in modules if m)
        if "--cpu" not in args:
            args.append("--cpu")
    python = sys.executable if cluster.head is not None else config.resources.ray_job_python
    return JobSpec(entrypoint=job_entrypoint(python, args), runtime_env=runtime_env,
                   metadata={"run_name": config.run_name, "dry_run": str(dry_run).lower()},
                   submission_id=f"gp-{config.run_name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}",
                   check_gpus=not dry_run)


def _job_exists(client: Any, submission_id: str) -> bool:
    try:
        client.get_job_info(submission_id)
    except Exception:  # noqa: BLE001 - Ray raises a plain RuntimeError for "job not found", the normal case
        return False
    return True


def submit_job(config: RunConfig, address: str, spec: JobSpec) -> str:
    """Check the cluster's GPUs and submit; idempotent (a retry after a lost reply finds the job by its id)."""
    client = connect(address)
    if _job_exists(client, spec.submission_id):
        return spec.submission_id
    if spec.check_gpus:
        check_cluster_gpus(config, client.get_address())
    job_id = client.submit_job(entrypoint=spec.entrypoint, runtime_env=spec.runtime_env, metadata=spec.metadata,
                               submission_id=spec.submission_id, entrypoint_num_cpus=0)
    log.info("submitted Ray job %s to %s", job_id, address)
    return job_id


async def _tail(client: Any, job_id: str, sink: Callable[[str], None]) -> None:
    async for chunk in client.tail_job_logs(job_id):
        for line in chunk.splitlines():
            sink(line)


def follow_job(client: Any, job_id: str, deadline_s: float, sink: Callable[[str], None]) -> int:
    """Stream the job's logs until it ends or the deadline passes (then stop it); map its status to an exit code.

    Interrupted here (Ctrl-C, SIGTERM), the job is stopped before the interruption goes on.
    """
    started = time.monotonic()
    try:
        asyncio.run(asyncio.wait_for(_tail(client, job_id, sink), timeout=deadline_s))
    except (asyncio.TimeoutError, TimeoutError):
        log.error("job %s passed its deadline of %.0f s (resources.job_deadline_s); stopping it", job_id, deadline_s)
        client.stop_job(job_id)
        _wait_terminal(client, job_id, 30.0)
        return EXIT_FAILED
    except BaseException:
        log.error("interrupted: stopping Ray job %s", job_id)
        with contextlib.suppress(Exception):
            client.stop_job(job_id)
            _wait_terminal(client, job_id, 30.0)
        raise
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


#: ``submit(config, address, spec) -> job id``; the Prefect task passes its retried wrapper of ``submit_job``.
SubmitFn = Callable[[RunConfig, str, JobSpec], str]


@dataclass
class JobOutcome:
    """How the job ended: exit code (0/1/2), its id, the cluster address and where its driver log is."""

    code: int
    job_id: str | None
    address: str
    log_path: str | None = None
    message: str = ""
    head_start_s: float = 0.0  # seconds the private local head took to answer (0: a configured cluster)


class _Terminated(Exception):
    """SIGTERM while following a job (turned into an exception so the job and the head are stopped)."""


#: Seconds the exit may take after a signal while the job and a private head are stopped.
STOP_GRACE_S = 60.0


@contextlib.contextmanager
def _sigterm_as_exception() -> Iterator[None]:
    """SIGTERM raises: under `gp` graph_planner.termination does it (its watchdog given time to stop the job and
    the head), elsewhere (a Prefect task) a handler installed for the block."""
    if termination.installed():
        termination.extend_grace(STOP_GRACE_S)
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        raise _Terminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_training_job(config: RunConfig, entrypoint_args: Sequence[str], dry_run: bool = False,
                     sink: Callable[[str], None] | None = None, submit: SubmitFn = submit_job) -> JobOutcome:
    """Prepare -> submit -> follow ``python -m graph_planner.training.verl.entry <args>`` on the run's cluster.

    With ``dry_run`` the entrypoint gets ``--dry-run`` (config, data and agent-loop checks, no training) and the
    GPU check is skipped, so the job plumbing can be exercised on any cluster. A failed or stopped job's outcome
    names the job id and its log (copied to ``<run dir>/verl/`` when the head was local); an interrupted follow
    stops the job (and a local head) before re-raising.
    """
    from graph_planner.config.run_dirs import RunDirInUse, refuse_clobber

    sink = sink or (lambda line: print(line, flush=True))
    run_dir = run_paths(config).run_dir.resolve()
    address, job_id = user_cluster_address(config.resources) or "local head", None
    try:
        refuse_clobber(run_dir, config.training.resume_from)
        problem = user_cluster_auth_problem(config)
        if problem:
            raise RayAuthError(problem)
    except (RunDirInUse, RayAuthError) as exc:
        log.error("%s", exc)
        return JobOutcome(EXIT_REFUSED, None, address, message=str(exc))
    try:
        with _sigterm_as_exception(), ray_cluster(config, run_dir) as cluster:
            address = cluster.address
            spec = prepare_job(config, entrypoint_args, cluster, dry_run)
            job_id = submit(config, cluster.address, spec)
            try:
                code = follow_job(connect(cluster.address), job_id, config.resources.job_deadline_s, sink)
            finally:
                kept = cluster.head.keep_job_log(job_id, run_dir / "verl") if cluster.head else None
            where = str(kept) if kept else f"`ray job logs {job_id} --address {cluster.address}`"
            head_s = cluster.head.started_s if cluster.head else 0.0
            if code == EXIT_SUCCEEDED:
                return JobOutcome(code, job_id, cluster.address, str(kept) if kept else None, head_start_s=head_s)
            message = f"Ray job {job_id} did not succeed; its log: {where}"
            log.error("%s", message)
            return JobOutcome(code, job_id, cluster.address, str(kept) if kept else None, message, head_s)
    except ClusterRefused as exc:
        log.error("%s", exc)
        return JobOutcome(EXIT_REFUSED, job_id, address, message=str(exc))
    except RayHeadError as exc:
        log.error("%s", exc)
        return JobOutcome(EXIT_REFUSED, None, address, message=str(exc))
    except (KeyboardInterrupt, _Terminated, termination.Terminated) as exc:
        message = (f"interrupted ({exc or 'Ctrl-C'}): Ray job {job_id or '(not submitted)'} stopped; its log: "
                   f"{run_dir / 'verl' / f'job-driver-{job_id}.log'}; resume with --set training.resume_from=auto")
        log.error("%s", message)
        if isinstance(exc, termination.Terminated):
            raise  # gp exits 143 / 130 with its one line
        signum = signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM
        return JobOutcome(termination.exit_code_for(signum), job_id, address, message=message)
