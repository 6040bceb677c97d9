"""The training curves of a run, whichever engine trained it: one table of panels, each fed by the metric names
either engine logs to the run's ``metrics.jsonl`` (the local trainer's own names; verl's ``actor/*`` /
``critic/*`` passed through by its telemetry bridge), and ``<run dir>/training_curves.png`` drawn from it.

Both engines log the episode metrics (``reward/*``, ``planner_parse_error_rate``) under the same names, so only
the optimiser's metrics need an alias. One table means the local plot, the verl plot and the learning curve
(:mod:`graph_planner.training.learning_curve`) read a metric the same way.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graph_planner.config.paths import TRAINING_CURVES

log = logging.getLogger(__name__)

#: Panel -> the metric names that feed it, first present wins: the local engine's name first, then verl's
#: (``actor/*`` from verl's actor; ``critic/score/mean`` is verl's own mean sequence score, only read when a step
#: has no episode metrics). Six panels: the 2 x 3 grid of telemetry.plots.training_curves_figure.
CURVES: dict[str, tuple[str, ...]] = {
    "reward/mean": ("reward/mean", "critic/score/mean"),
    "reward/resolved_rate": ("reward/resolved_rate",),
    "pg_loss": ("pg_loss", "actor/pg_loss"),  # the policy loss both compute (verl logs no total loss)
    "entropy": ("entropy", "actor/entropy"),
    "planner_parse_error_rate": ("planner_parse_error_rate",),
    "grad_norm": ("grad_norm", "actor/grad_norm"),
}


def curve_value(metrics: Mapping[str, Any], panel: str) -> float | None:
    """The value feeding ``panel`` in one step's metrics: its first alias holding a finite number, else None (a
    skipped update's non-finite grad norm is no point)."""
    for name in CURVES[panel]:
        value = metrics.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def curve_points(rows: Mapping[int, Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """Every panel's ``(step, value)`` points from a run's metrics per step (``read_step_metrics`` of its
    ``metrics.jsonl``), local or verl names alike; a panel no step feeds has no points."""
    points: dict[str, list[tuple[int, float]]] = {panel: [] for panel in CURVES}
    for step, metrics in sorted(rows.items()):
        for panel in CURVES:
            value = curve_value(metrics, panel)
            if value is not None:
                points[panel].append((int(step), value))
    return points


def plot_training_curves(run_dir: Path, run_name: str | None = None) -> Path | None:
    """``<run_dir>/training_curves.png`` from the run's ``metrics.jsonl``; None when there is nothing to plot (no
    file, no point) or drawing fails: a plot is never worth failing a trained run for, so the error is a warning.
    A full or read-only disk still raises (gp's exit 5, graph_planner.disk): it is not a plotting error."""
    from graph_planner.disk import find_disk_error
    from graph_planner.telemetry.plots import save_figure, training_curves_figure
    from graph_planner.telemetry.trackers import read_step_metrics

    metrics_file = Path(run_dir) / "metrics.jsonl"
    if not metrics_file.is_file():
        return None
    try:
        fig = training_curves_figure(curve_points(read_step_metrics(metrics_file)), run_name or Path(run_dir).name)
        return None if fig is None else save_figure(fig, Path(run_dir) / TRAINING_CURVES)
    except Exception as exc:  # noqa: BLE001 - matplotlib or a malformed row: the curves are lost, not the run
        if find_disk_error(exc) is not None:
            raise
        log.warning("training curves of %s not drawn: %s: %s", run_dir, type(exc).__name__, exc)
        return None
