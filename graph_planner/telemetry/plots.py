"""The PNG plots users look at (training curves, eval outcomes), built as matplotlib Figure objects.

Figures are made with the object API (no pyplot state, safe from worker threads) so tests can check what a reader
sees — integer step ticks, no offset notation, the run name in the title, one colour per outcome — before saving.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, ScalarFormatter

#: One fixed colour per eval outcome, so "timeout" never looks like "resolved" and colours mean the same in every
#: report (green = solved, warm colours = the agent's failures, greys = infrastructure errors).
OUTCOME_COLOURS: dict[str, str] = {
    "resolved": "#2E7D32",
    "unresolved": "#EF6C00",
    "patch_failed": "#C62828",
    "no_patch": "#FBC02D",
    "timeout": "#6A1B9A",
    "sandbox_error": "#616161",
    "agent_error": "#9E9E9E",
}
FALLBACK_COLOUR = "#1565C0"


def _readable_axes(ax: Axes, *, integer_x: bool = False, integer_y: bool = False) -> None:
    """Whole-number ticks where the quantity is a count, and plain tick labels (no "1e-5+6.578" offset)."""
    if integer_x:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if integer_y:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    for axis in (ax.xaxis, ax.yaxis):
        formatter = axis.get_major_formatter()
        if isinstance(formatter, ScalarFormatter):
            formatter.set_useOffset(False)


def training_curves_figure(series: Mapping[str, Sequence[tuple[int, float]]], run_name: str) -> Figure | None:
    """One panel per metric against the optimiser step; None when no metric has a point."""
    present = {name: sorted(points) for name, points in series.items() if points}
    if not present:
        return None
    fig = Figure(figsize=(3.4 * len(present), 3.2))
    axes = fig.subplots(1, len(present), squeeze=False)[0]
    for ax, (name, points) in zip(axes, present.items()):
        steps, values = zip(*points)
        ax.plot(steps, values, marker="o", color=FALLBACK_COLOUR)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step")
        _readable_axes(ax, integer_x=True)
    fig.suptitle(f"Training: {run_name}", fontsize=11)
    fig.tight_layout()
    return fig


def resolved_rate_figure(rates: Mapping[str, float], run_name: str) -> Figure:
    """Resolved % per label (the policy, baselines, the official harness)."""
    fig = Figure(figsize=(6, 3.6))
    ax = fig.subplots()
    labels = list(rates)
    bars = ax.bar(labels, [rates[k] * 100 for k in labels],
                  color=[FALLBACK_COLOUR if label == "policy" else "#999999" for label in labels])
    ax.bar_label(bars, fmt="%.1f%%")
    ax.set_ylim(0, 105)
    ax.set_ylabel("resolved (%)")
    ax.set_title(f"Resolved rate: {run_name}")
    _readable_axes(ax)
    fig.tight_layout()
    return fig


def outcomes_figure(counts: Mapping[str, int], run_name: str) -> Figure:
    """Tasks per outcome category, each category in its own colour."""
    fig = Figure(figsize=(6, 3.6))
    ax = fig.subplots()
    names = sorted(counts, key=lambda n: (list(OUTCOME_COLOURS).index(n) if n in OUTCOME_COLOURS else 99, n))
    bars = ax.barh(names, [counts[n] for n in names],
                   color=[OUTCOME_COLOURS.get(n, FALLBACK_COLOUR) for n in names])
    ax.bar_label(bars)
    ax.set_xlabel("tasks")
    ax.set_title(f"Outcomes (policy): {run_name}")
    _readable_axes(ax, integer_x=True)
    fig.tight_layout()
    return fig


def steps_figure(steps: Sequence[int], run_name: str) -> Figure:
    """How many steps episodes took (a histogram with one whole-step bin per value)."""
    fig = Figure(figsize=(6, 3.6))
    ax = fig.subplots()
    if steps:
        ax.hist(steps, bins=range(min(steps), max(steps) + 2), color="#C44E52", edgecolor="white", align="left")
    ax.set_xlabel("steps per episode")
    ax.set_ylabel("tasks")
    ax.set_title(f"Steps per episode (policy): {run_name}")
    _readable_axes(ax, integer_x=True, integer_y=True)
    fig.tight_layout()
    return fig


def save_figure(fig: Figure, path: Path, dpi: int = 100) -> Path:
    """Write the PNG (the Agg canvas is attached by savefig; no display needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path
