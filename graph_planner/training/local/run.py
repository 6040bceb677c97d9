"""The local training stage as one plain function (used by `gp train` and the Prefect train task): env rollouts,
LocalGRPOTrainer, telemetry (trackers, heartbeats, episode metrics) and a PNG of the training curves (drawn by
:mod:`graph_planner.training.curves`, as a verl run's are)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graph_planner.config.schema import RunConfig
from graph_planner.telemetry.trackers import truncate_step_metrics
from graph_planner.training.curves import plot_training_curves

log = logging.getLogger(__name__)


@dataclass
class LocalTrainResult:
    run_dir: Path
    step: int
    checkpoint: Path | None
    curves_png: Path | None
    tracking: dict[str, str] = field(default_factory=dict)  # W&B URL or offline dir, when W&B ran


def train_local(config: RunConfig, on_step: Callable[[dict[str, float], int, int], None] | None = None,
                dry_run: bool = False, rollout: tuple[list[Any], Any] | None = None) -> LocalTrainResult:
    """Train to ``training.total_steps`` (resuming per ``training.resume_from``); ``on_step(metrics, step, total)``
    is called after each step (progress bars, Prefect artifacts). A run that does not resume refuses a run dir
    holding an earlier training run (:class:`~graph_planner.config.run_dirs.RunDirInUse`); a run dir another
    process trains in is refused (:class:`~graph_planner.config.run_lock.RunLockedError`). ``rollout``: the
    ``make_env_rollout`` result when the caller built it already (to refuse missing data before writing)."""
    from graph_planner.config.paths import run_paths
    from graph_planner.config.run_lock import run_lock

    with run_lock(run_paths(config).run_dir):  # re-entered when `gp train` holds it already
        return _train_locked(config, on_step, dry_run, rollout)


def _train_locked(config: RunConfig, on_step: Callable[[dict[str, float], int, int], None] | None,
                  dry_run: bool, rollout: tuple[list[Any], Any] | None) -> LocalTrainResult:
    from graph_planner.config.paths import run_paths
    from graph_planner.config.run_dirs import refuse_clobber
    from graph_planner.telemetry.metrics import episode_metrics
    from graph_planner.telemetry.session import run_telemetry
    from graph_planner.training.local.checkpoint import latest_checkpoint
    from graph_planner.training.local.rollout import make_env_rollout
    from graph_planner.training.local.trainer import LocalGRPOTrainer

    refuse_clobber(run_paths(config).run_dir, config.training.resume_from)
    tasks, rollout_fn = rollout if rollout is not None else make_env_rollout(config)
    if dry_run:
        trainer = LocalGRPOTrainer(config, rollout_fn, tasks)
        return LocalTrainResult(trainer.run_dir, trainer.step, latest_checkpoint(trainer.run_dir), None)
    prepare_resume(config)
    with run_telemetry(config) as tracker:
        step_episodes: list[Any] = []  # every rollout wave of the current step
        step_seconds = [0.0]

        def rollout_with_metrics(policy: Any, batch: list[Any], group_size: int) -> list[Any]:
            started = time.monotonic()
            trajectories = rollout_fn(policy, batch, group_size)
            step_seconds[0] += time.monotonic() - started
            step_episodes.extend(trajectories)
            return trajectories

        def log_fn(metrics: dict[str, float], step: int) -> None:
            groups = [i // config.training.group_size for i in range(len(step_episodes))]  # task by task
            episodes = (episode_metrics(step_episodes, max(step_seconds[0], 1e-6), config.telemetry, groups)
                        if step_episodes else {})
            step_episodes.clear()
            step_seconds[0] = 0.0
            merged = {**episodes, **metrics}  # patch_*, reject/*, loc/*, parse-error rate + the trainer's own
            tracker(merged, step)
            if on_step is not None:
                on_step(merged, step, trainer.max_steps)

        trainer = LocalGRPOTrainer(config, rollout_with_metrics, tasks, log_fn=log_fn)
        tracker.watch(trainer.model)
        trainer.train()
        curves = plot_training_curves(trainer.run_dir, config.run_name)
        checkpoint = latest_checkpoint(trainer.run_dir)
        publish_training(tracker, config, curves, checkpoint)
        links = tracker.links()
    return LocalTrainResult(trainer.run_dir, trainer.step, checkpoint, curves, links)


def prepare_resume(config: RunConfig) -> None:
    """Under the run lock, before telemetry opens: remove checkpoint temp dirs a killed save left, and on a resume
    drop the metrics rows past the checkpoint (the steps run again), so ``metrics.jsonl`` holds each step once."""
    from graph_planner.config.paths import run_paths
    from graph_planner.training.local import checkpoint as ckpt

    run_dir = run_paths(config).run_dir
    for orphan in ckpt.remove_orphan_temps(run_dir):
        log.info("removed %s (left by a checkpoint save that was killed)", orphan)
    if config.training.resume_from is None:
        return
    resume = ckpt.resolve_resume(config.training.resume_from, run_dir)
    step = ckpt.checkpoint_step(resume) if resume is not None else 0  # no checkpoint yet: every step runs again
    dropped = truncate_step_metrics(run_dir / "metrics.jsonl", step)
    if dropped:
        log.info("resuming at step %d: %d metrics row(s) past it dropped from metrics.jsonl", step, dropped)


def publish_training(tracker: Any, config: RunConfig, curves: Path | None, checkpoint: Path | None) -> None:
    """The curves as an image and, when ``logging.wandb.log_checkpoints``, the final checkpoint as an artifact."""
    if curves is not None:
        tracker.log_images({"training_curves": curves})
    if checkpoint is not None and config.logging.wandb.log_checkpoints:
        from graph_planner.training.local.checkpoint import MODEL_DIR

        model = checkpoint / MODEL_DIR  # the HF model dir (weights + tokenizer), not the optimizer state
        tracker.log_artifact(model if model.is_dir() else checkpoint, name=f"{config.run_name}-model", kind="model")
