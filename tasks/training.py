"""GRPO training step. ``training.backend=local`` trains in this process (toy model / one GPU); ``verl`` submits
the verl job to Ray and follows it to the end, forwarding its log lines as ``[ray] ...`` into the run logger and
a progress artifact. Only the *submission* is retried (transient cluster errors); a failed job fails the step.

Result: the checkpoint to evaluate (local: ``<run dir>/checkpoints/step_<k>/model``, an ordinary HF model dir;
verl: the latest ``global_step_<k>/actor/huggingface`` dir when verl wrote one, else the checkpoint root).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from graph_planner.config.paths import parquet_path, run_paths
from graph_planner.config.schema import RunConfig
from tasks.artifacts import ProgressArtifact, run_scope
from tasks.caching import InputFileContents, step_cache
from tasks.config import load_resolved
from tasks.retry import IO_RETRIES, IO_RETRY_DELAYS, IO_RETRY_JITTER, transient_only

_VERL_STEP = re.compile(r"\bstep:(\d+)\b")


@task(name="train", persist_result=True,
      cache_policy=step_cache("train", ("graph_planner",), InputFileContents(exclude=("config_file",))))
def run_training(config_file: str, registry: str, planner_model: str = "") -> str:
    """Train to ``training.total_steps`` from ``planner_model`` (the SFT warm start; '' = ``paths.planner_model``);
    return the checkpoint to evaluate."""
    config = load_resolved(config_file)
    if planner_model:
        config.paths.planner_model = planner_model
    bar = ProgressArtifact(f"{run_scope(config.run_name)}-training-progress",
                           f"GRPO steps of {config.run_name} ({config.training.backend})")
    try:
        if config.training.backend == "local":
            return train_in_process(config, bar)
        return train_verl(config, config_file, registry, bar)
    finally:
        bar.close()  # bounded wait for the last progress update; a down API costs a warning, not the step


def train_in_process(config: RunConfig, bar: ProgressArtifact) -> str:
    from graph_planner.training.local.checkpoint import MODEL_DIR
    from graph_planner.training.local.run import train_local

    logger = get_run_logger()

    def on_step(metrics: dict[str, float], step: int, total: int) -> None:
        bar.update(step, total, f"step {step}/{total}")
        logger.info("step %d/%d: reward/mean=%.3f loss=%.4f", step, total, metrics.get("reward/mean", 0.0),
                    metrics.get("loss", float("nan")))

    result = train_local(config, on_step=on_step)
    if result.checkpoint is None:
        raise RuntimeError(f"training finished without a checkpoint in {result.run_dir}/checkpoints")
    return str(result.checkpoint / MODEL_DIR)


def train_verl(config: RunConfig, config_file: str, registry: str, bar: ProgressArtifact) -> str:
    from graph_planner.training.ray import job as ray_job

    logger = get_run_logger()
    train, val = (parquet_path(registry, config.data.dataset_name, split) for split in ("train", "val"))
    args = ["--config-file", str(ray_job.write_job_config(config)), "--train-files", str(train.resolve())]
    if val.is_file():
        args += ["--val-files", str(val.resolve())]
    total = config.training.total_steps

    def sink(line: str) -> None:
        logger.info("[ray] %s", line)
        match = _VERL_STEP.search(line)
        if match:
            bar.update(int(match.group(1)), total, f"step {match.group(1)}/{total}")

    outcome = ray_job.run_training_job(config, args, sink=sink, submit=submit_ray_job)
    if outcome.code != ray_job.EXIT_SUCCEEDED:
        raise RuntimeError(outcome.message or f"Ray job {outcome.job_id} did not succeed")
    return verl_checkpoint(run_paths(config).checkpoints)


@task(name="submit-ray-job", cache_policy=NO_CACHE, retries=IO_RETRIES, retry_delay_seconds=IO_RETRY_DELAYS,
      retry_jitter_factor=IO_RETRY_JITTER, retry_condition_fn=transient_only)
def submit_ray_job(config: RunConfig, address: str, spec: Any) -> str:
    """``ray_job.submit_job`` with retries on transient errors (it is idempotent: same submission id)."""
    from graph_planner.training.ray import job as ray_job

    job_id = ray_job.submit_job(config, address, spec)
    get_run_logger().info("submitted Ray job %s to %s", job_id, address)
    return job_id


def verl_checkpoint(root: Path) -> str:
    """The newest HF model dir verl wrote (``global_step_<k>/actor/huggingface``), else the checkpoint root."""
    from graph_planner.training.local.checkpoint import latest_verl_model

    return str(latest_verl_model(root) or root)
