"""One learning run on the real env, measured: the SFT warm start (when ``training.sft.enabled``), then GRPO on the
configured engine (``training.backend``: local in this process, or verl as a Ray job on a private local head),
recording every GRPO step's metrics. Used by ``benchmarks/env_learning.py`` (several seeds, either engine) and the
CI learning-regression tests (one short seed), so both engines are measured the same way.

The figures that matter for "does GRPO itself learn": per-step ``reward/mean`` of the GRPO phase only (the SFT
model's first rollouts are step 1), the mean of its first and last ``window`` steps and their difference, and the
planner parse error rate at the first and last steps.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from graph_planner.config.schema import RunConfig
from graph_planner.telemetry.trackers import read_step_metrics
from graph_planner.training.curves import curve_points


def window_means(values: list[float], window: int) -> tuple[float, float]:
    """Means of the first and the last ``window`` values (the whole list when it is shorter)."""
    if not values:
        raise ValueError("no values: the GRPO phase logged no steps")
    w = max(1, min(window, len(values)))
    return statistics.fmean(values[:w]), statistics.fmean(values[-w:])


def train_through_api(config: RunConfig) -> Path:
    """GRPO on the configured engine through the one train API (``gp train``'s path; verl: the prepared data
    registered when it is not yet, the Ray job on a private local head, followed to the end); returns the run dir.
    Raises on failure."""
    from graph_planner.training.api import train

    outcome = train(config)
    if not outcome.ok:
        raise RuntimeError(outcome.message or f"verl job {outcome.job_id} failed (exit {outcome.exit_code})")
    return outcome.run_dir


def run_learning(config: RunConfig, window: int = 5) -> dict[str, Any]:
    """SFT (if enabled) then GRPO to ``training.total_steps``; return the curve and its summary figures."""
    from graph_planner.training.sft.trainer import run_sft

    started = time.monotonic()
    sft_seconds = 0.0
    sft_info: dict[str, Any] | None = None
    if config.training.sft.enabled:
        result = run_sft(config)
        sft_seconds = time.monotonic() - started
        sft_info = {"examples": result.examples, "episodes_kept": result.episodes_kept,
                    "episodes": result.episodes, "train_loss": round(result.train_loss, 4)}
        config = config.model_copy(deep=True)
        config.paths.planner_model = str(result.model_dir)
    grpo_started = time.monotonic()
    run_dir = train_through_api(config)
    # both engines log each step's episode metrics to the run's metrics.jsonl (verl: the job's telemetry bridge),
    # so the curve is read the same way whichever engine trained
    logged = read_step_metrics(run_dir / "metrics.jsonl")
    steps = [{"step": step, **{k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}}
             for step, metrics in logged.items() if "reward/mean" in metrics]
    grad_norms = dict(curve_points(logged)["grad_norm"])  # either engine's name (training.curves.CURVES)
    grpo_seconds = time.monotonic() - grpo_started
    rewards = [s.get("reward/mean", 0.0) for s in steps]
    first, last = window_means(rewards, window)
    parse = [s.get("planner_parse_error_rate", 0.0) for s in steps]
    return {
        "seed": config.experiment.seed,
        "steps": len(steps),
        "reward_mean": [round(r, 4) for r in rewards],
        "reward_std": [round(s.get("reward/std", 0.0), 4) for s in steps],
        "resolved_rate": [round(s.get("reward/resolved_rate", s.get("patch_success_rate", 0.0)), 4) for s in steps],
        "loc_m_recall": [round(s.get("loc/m_recall", 0.0), 4) for s in steps],
        "grad_norm": [round(grad_norms.get(s["step"], 0.0), 4) for s in steps],
        # null where the run did not log it (a verl run from before compat added it), not a 0.0 that reads as
        # "no advantage, nothing learned"
        "advantage_abs_mean": [None if s.get("advantage/abs_mean") is None else round(s["advantage/abs_mean"], 4)
                               for s in steps],
        "window": window,
        "first_mean": round(first, 4),
        "last_mean": round(last, 4),
        "rise": round(last - first, 4),
        "parse_error_first": round(parse[0], 4),
        "parse_error_last": round(parse[-1], 4),
        "sft": sft_info,
        "sft_seconds": round(sft_seconds, 2),
        "grpo_seconds": round(grpo_seconds, 2),
        "wall_seconds": round(time.monotonic() - started, 2),
        "backend": config.training.backend,
        "run_dir": str(Path(run_dir)),
    }
