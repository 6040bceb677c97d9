"""What a reader of the PNGs sees: whole-number step ticks, no offset notation, the run name in the title, and a
distinct colour per outcome (a timeout must not look like a resolved task). Checked on the Figure objects, after
drawing, exactly as they are saved."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.text import Text

from graph_planner.telemetry import plots


def _drawn(fig):
    FigureCanvasAgg(fig).draw()  # tick locations and offset text are decided at draw time, as in savefig
    return fig


def _tick_values(axis) -> list[float]:
    lo, hi = axis.get_view_interval()
    return [t for t in axis.get_majorticklocs() if lo - 1e-9 <= t <= hi + 1e-9]


def test_training_curves_have_integer_steps_no_offset_and_the_run_name() -> None:
    # 3 steps (matplotlib's default ticks would be 1.0, 1.25, ...) and a loss drifting at 1e-5 around 6.578
    series = {"loss": [(1, 6.57801), (2, 6.57803), (3, 6.57806)], "reward/mean": [(1, 0.1), (2, 0.4), (3, 0.7)]}
    fig = _drawn(plots.training_curves_figure(series, "demo-run-42"))
    assert "demo-run-42" in fig._suptitle.get_text()
    for ax in fig.axes:
        steps = _tick_values(ax.xaxis)
        assert steps and all(float(t).is_integer() for t in steps), steps
        assert ax.yaxis.get_offset_text().get_text() == "", "offset notation on the y axis"
        assert ax.xaxis.get_offset_text().get_text() == ""
    assert [ax.get_title() for ax in fig.axes] == ["loss", "reward/mean"]


def test_training_curves_without_points_make_no_figure() -> None:
    assert plots.training_curves_figure({"loss": []}, "r") is None


def test_outcome_categories_each_get_their_own_colour() -> None:
    counts = {"resolved": 2, "timeout": 1, "unresolved": 3, "sandbox_error": 1}
    fig = _drawn(plots.outcomes_figure(counts, "eval-7"))
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()]
    colours = {name: to_hex(bar.get_facecolor()) for name, bar in zip(names, ax.patches)}
    assert set(colours) == set(counts)
    assert len(set(colours.values())) == len(colours), colours
    assert colours["resolved"] == to_hex(plots.OUTCOME_COLOURS["resolved"])
    assert colours["timeout"] != colours["resolved"]
    assert "eval-7" in ax.get_title()
    assert all(float(t).is_integer() for t in _tick_values(ax.xaxis))


def test_steps_histogram_has_whole_step_and_task_ticks(tmp_path: Path) -> None:
    fig = _drawn(plots.steps_figure([3, 4, 4, 7], "eval-7"))
    ax = fig.axes[0]
    assert all(float(t).is_integer() for t in _tick_values(ax.xaxis))
    assert all(float(t).is_integer() for t in _tick_values(ax.yaxis))
    png = plots.save_figure(fig, tmp_path / "steps_hist.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_resolved_rate_figure_names_the_run_and_labels_the_bars() -> None:
    fig = _drawn(plots.resolved_rate_figure({"policy": 0.25, "gold": 1.0}, "eval-7"))
    ax = fig.axes[0]
    assert "eval-7" in ax.get_title()
    assert [t.get_text() for t in ax.texts] == ["25.0%", "100.0%"]


SIX_CURVES = {name: [(1, 0.5), (2, 0.25)] for name in
              ("reward/mean", "reward/resolved_rate", "loss", "entropy", "planner_parse_error_rate", "grad_norm")}


def _visible_tick_labels(axis) -> list[str]:
    """The tick label texts a reader sees (labels of ticks outside the view are not drawn)."""
    lo, hi = sorted(axis.get_view_interval())
    return [label.get_text() for tick, label in zip(axis.get_majorticklocs(), axis.get_ticklabels())
            if lo - 1e-9 <= tick <= hi + 1e-9]


def _all_figures():
    return {"training_curves": plots.training_curves_figure(SIX_CURVES, "a-long-run-name-of-the-nightly-eval"),
            "resolved_rate": plots.resolved_rate_figure({"policy": 0.25, "gold": 1.0, "empty": 0.0}, "eval-7"),
            "outcomes": plots.outcomes_figure({"resolved": 1, "unresolved": 3}, "eval-7"),
            "steps_hist": plots.steps_figure([4, 4, 4, 4], "eval-7")}


@pytest.mark.parametrize("name", ["training_curves", "resolved_rate", "outcomes", "steps_hist"])
def test_every_figure_fits_the_850_px_artifact_column_with_text_at_least_10_px(name: str, tmp_path: Path) -> None:
    fig = _drawn(_all_figures()[name])
    png = plots.save_figure(fig, tmp_path / f"{name}.png")
    height, width = matplotlib.image.imread(png).shape[:2]
    assert width <= 850, f"{name}.png is {width} px wide: the artifact column shrinks it and its text"
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    assert texts
    small = {t.get_text(): round(t.get_fontsize() * plots.DPI / 72, 1) for t in texts
             if t.get_fontsize() * plots.DPI / 72 < 10}
    assert not small, f"text under 10 px in {name}: {small}"


def test_six_training_curves_are_a_two_by_three_grid() -> None:
    fig = _drawn(plots.training_curves_figure(SIX_CURVES, "r"))
    lefts = {round(ax.get_position().x0, 3) for ax in fig.axes}
    bottoms = {round(ax.get_position().y0, 3) for ax in fig.axes}
    assert (len(fig.axes), len(lefts), len(bottoms)) == (6, 3, 2)


@pytest.mark.parametrize("steps", [[4, 4, 4, 4], [3, 4], [1, 2, 2, 9]])
def test_integer_quantities_have_integer_tick_labels_in_every_plot(steps: list[int]) -> None:
    """Every episode taking 4 steps once gave labels 3.45 ... 4.50; one optimiser step gave 0.95 ... 1.05."""
    one_step = {name: [(1, 0.5)] for name in SIX_CURVES}
    integer_axes = [(fig := _drawn(plots.steps_figure(steps, "r"))).axes[0].xaxis, fig.axes[0].yaxis,
                    _drawn(plots.outcomes_figure({"resolved": 1}, "r")).axes[0].xaxis,
                    *[ax.xaxis for ax in _drawn(plots.training_curves_figure(one_step, "r")).axes]]
    for axis in integer_axes:
        labels = _visible_tick_labels(axis)
        assert labels and all(label.replace("\N{MINUS SIGN}", "-").lstrip("-").isdigit() for label in labels), labels
