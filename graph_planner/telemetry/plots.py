"""The PNG plots users look at (training curves, eval outcomes), built as matplotlib Figure objects.

Figures are made with the object API (no pyplot state, safe from worker threads) so tests can check what a reader
sees — integer step ticks, no offset notation, the run name in the title, one colour per outcome — before saving.
Every figure fits the ~850 px column where the Prefect UI shows a report artifact at full size (saved at ``DPI``,
at most ``MAX_WIDTH_PX`` wide), so its text stays at least ~10 px tall there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from graph_planner.disk import atomic_path

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
#: Saved resolution and the widest figure: the Prefect UI's artifact column is ~850 px, and a wider PNG is shrunk
#: into it (a 1836 px row of six panels showed 4 px text).
DPI = 100
MAX_WIDTH_PX = 850
#: Panels per row of the training-curves grid (six curves -> 2 x 3).
CURVE_COLUMNS = 3


def _readable_axes(ax: Axes, *, integer_x: bool = False, integer_y: bool = False) -> None:
    """Whole-number ticks where the quantity is a count, and plain tick labels (no "1e-5+6.578" offset).

    ``min_n_ticks=1``: with the default 2 the locator gives up on integers when the view holds a single whole number
    (one step, or every episode taking 4 steps) and labels 3.45 ... 4.50."""
    if integer_x:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    if integer_y:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    for axis in (ax.xaxis, ax.yaxis):
        formatter = axis.get_major_formatter()
        if isinstance(formatter, ScalarFormatter):
            formatter.set_useOffset(False)


def training_curves_figure(series: Mapping[str, Sequence[tuple[int, float]]], run_name: str) -> Figure | None:
    """One panel per metric against the optimiser step, ``CURVE_COLUMNS`` panels a row (six curves: a 2 x 3 grid
    ``MAX_WIDTH_PX`` wide); None when no metric has a point."""
    present = {name: sorted(points) for name, points in series.items() if points}
    if not present:
        return None
    columns = min(CURVE_COLUMNS, len(present))
    rows = -(-len(present) // columns)
    fig = Figure(figsize=(MAX_WIDTH_PX / DPI * columns / CURVE_COLUMNS, 0.4 + 2.6 * rows))
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax, (name, points) in zip(axes, present.items()):
        steps, values = zip(*points)
        ax.plot(steps, values, marker="o", color=FALLBACK_COLOUR)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step")
        _readable_axes(ax, integer_x=True)
    for ax in axes[len(present):]:
        fig.delaxes(ax)
    fig.suptitle(f"Training: {run_name}", fontsize=12)
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


def save_figure(fig: Figure, path: Path, dpi: int = DPI) -> Path:
    """Write the PNG (the Agg canvas is attached by savefig; no display needed) through a temp file, so a full
    disk leaves no truncated image."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
    return path
