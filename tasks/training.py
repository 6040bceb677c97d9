"""GRPO training step: :func:`graph_planner.training.api.train` (the same function as `gp train`, so the same
engine choice, refusals, val-file rule, prepull decision and checkpoint finder) with what the DAG adds: caching,
the retried job submission (only the *submission* is retried: transient cluster errors), the verl job's log lines
as ``[ray] ...`` in the run logger, a progress artifact for both engines, and a failed step for any outcome that
is not 0 (a refusal or a failed job; never retried).

Result: the model to evaluate (local: ``<run dir>/checkpoints/step_<k>/model``; verl: the newest
``global_step_<k>/actor/huggingface`` dir, else the checkpoint root when verl wrote no HF model).
"""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from graph_planner.config.paths import run_paths
from graph_planner.config.schema import RunConfig
from tasks.artifacts import ProgressArtifact, run_scope
from tasks.caching import InputFileContents, step_cache
from tasks.config import load_resolved
from tasks.retry import IO_RETRIES, IO_RETRY_DELAYS, IO_RETRY_JITTER, transient_only


@task(name="train", persist_result=True,
      cache_policy=step_cache("train", ("graph_planner",), InputFileContents(exclude=("config_file",))))
def run_training(config_file: str, registry: str, planner_model: str = "") -> str:
    """Train to ``training.total_steps`` from ``planner_model`` (the SFT warm start; '' = ``paths.planner_model``);
    return the model to evaluate."""
    from graph_planner.training.api import train

    config = load_resolved(config_file)
    if planner_model:
        config.paths.planner_model = planner_model
    logger = get_run_logger()
    bar = ProgressArtifact(f"{run_scope(config.run_name)}-training-progress",
                           f"GRPO steps of {config.run_name} ({config.training.backend})")

    def on_step(metrics: dict[str, float], step: int, total: int) -> None:
        bar.update(step, total, f"step {step}/{total}")
        if config.training.backend == "local":  # verl's own line is in the log already ([ray] step:k - ...)
            logger.info("step %d/%d: reward/mean=%.3f loss=%.4f", step, total, metrics.get("reward/mean", 0.0),
                        metrics.get("loss", float("nan")))

    try:
        # the flow wrote resolved_config.yaml (later steps read it): the run lock only, no rewrite
        outcome = train(config, registry=registry, on_step=on_step, job_log=lambda line: logger.info("[ray] %s", line),
                        progress=logger.info, submit=submit_ray_job, write_config=False)
    finally:
        bar.close()  # bounded wait for the last progress update; a down API costs a warning, not the step
    if not outcome.ok:
        raise RuntimeError(outcome.message)
    if outcome.model_dir is not None:
        return str(outcome.model_dir)
    logger.warning("verl wrote no HF model (add hf_model to actor.checkpoint.save_contents); returning the "
                   "checkpoint root")
    return str(run_paths(config).checkpoints)


@task(name="submit-ray-job", cache_policy=NO_CACHE, retries=IO_RETRIES, retry_delay_seconds=IO_RETRY_DELAYS,
      retry_jitter_factor=IO_RETRY_JITTER, retry_condition_fn=transient_only)
def submit_ray_job(config: RunConfig, address: str, spec: Any) -> str:
    """``ray_job.submit_job`` with retries on transient errors (it is idempotent: same submission id)."""
    from graph_planner.training.ray import job as ray_job

    job_id = ray_job.submit_job(config, address, spec)
    get_run_logger().info("submitted Ray job %s to %s", job_id, address)
    return job_id
