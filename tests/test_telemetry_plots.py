"""What a reader of the PNGs sees: whole-number step ticks, no offset notation, the run name in the title, and a
distinct colour per outcome (a timeout must not look like a resolved task). Checked on the Figure objects, after
drawing, exactly as they are saved."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex

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
