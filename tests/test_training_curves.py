"""Training curves from either engine (graph_planner/training/curves.py): a verl run's metrics.jsonl (written by
its real telemetry bridge, verl's own ``actor/*`` / ``critic/*`` names) and a local run's (the local trainer's
names) give the same panels and points, both draw ``training_curves.png``, a verl run's outcome names it (and the
eval report finds it from the trained model, as a local run's), a plot error is a warning on both engines, and the
learning curve reads the grad norm through the same alias table."""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from graph_planner.config.loader import load_run_config
from graph_planner.config.paths import RESOLVED_CONFIG, TRAINING_CURVES
from graph_planner.config.schema import RunConfig
from graph_planner.episode.summary import EpisodeSummary
from graph_planner.telemetry import plots
from graph_planner.telemetry.metrics import with_seed_names
from graph_planner.telemetry.trackers import JsonlTracker, read_step_metrics
from graph_planner.training import curves
from graph_planner.training.curves import CURVES, curve_points, plot_training_curves
from graph_planner.training.verl.telemetry import EPISODES_FILE, VERL_METRICS_FILE, VerlTelemetryBridge, record_episode

#: Per step: (episode returns, resolved flags, parse errors, steps) and the optimiser's numbers, one run's worth.
STEPS = {
    1: {"returns": (0.0, 1.0), "resolved": (False, True), "parse_errors": (1, 0), "turns": (2, 2),
        "pg_loss": 0.3, "entropy": 1.2, "grad_norm": 0.7},
    2: {"returns": (1.0, 1.0), "resolved": (True, True), "parse_errors": (0, 0), "turns": (2, 2),
        "pg_loss": -0.1, "entropy": 0.9, "grad_norm": 0.4},
}
#: What each panel must show for STEPS, whichever engine logged it.
EXPECTED = {
    "reward/mean": [(1, 0.5), (2, 1.0)],
    "reward/resolved_rate": [(1, 0.5), (2, 1.0)],
    "pg_loss": [(1, 0.3), (2, -0.1)],
    "entropy": [(1, 1.2), (2, 0.9)],
    "planner_parse_error_rate": [(1, 0.25), (2, 0.0)],
    "grad_norm": [(1, 0.7), (2, 0.4)],
}


def run_config(tmp_path: Path, backend: str) -> RunConfig:
    """A run whose only tracker is the JSONL one (no W&B, no heartbeats)."""
    return load_run_config(None, {"logging.output_dir": str(tmp_path), "experiment.run_name": backend,
                                  "logging.log_backend": "jsonl", "telemetry.log_ray": False,
                                  "telemetry.log_gpu": False, "training.backend": backend})


def verl_run(tmp_path: Path) -> Path:
    """A verl run dir as a job leaves it: agent-loop workers' episodes and verl's ``file`` logger lines, turned
    into metrics.jsonl by the job's real telemetry bridge."""
    config = run_config(tmp_path, "verl")
    run_dir = tmp_path / "verl"
    bridge = VerlTelemetryBridge(config, run_dir, poll_s=3600).start()
    lines = []
    for step, s in STEPS.items():
        for i, ret in enumerate(s["returns"]):
            summary = EpisodeSummary(f"t{i}", episode_return=ret, resolved=s["resolved"][i], steps=s["turns"][i],
                                     termination_reason="submitted", parse_errors=s["parse_errors"][i])
            record_episode(run_dir / "verl" / EPISODES_FILE, step - 1, summary, 1.0, group=f"g{step}")
        lines.append({"step": step, "data": {"actor/pg_loss": s["pg_loss"], "actor/entropy": s["entropy"],
                                             "actor/grad_norm": s["grad_norm"], "actor/pg_clipfrac": 0.0,
                                             "critic/score/mean": sum(s["returns"]) / 2,
                                             "critic/rewards/mean": sum(s["returns"]) / 2, "timing_s/gen": 10.0}})
    (run_dir / "verl" / VERL_METRICS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))
    bridge.stop()  # drains what verl wrote
    return run_dir


def local_run(tmp_path: Path) -> Path:
    """A local run dir: the local trainer's names (``loss`` is the total loss, not the policy loss)."""
    run_dir = tmp_path / "local"
    tracker = JsonlTracker(run_dir / "metrics.jsonl")
    tracker.log_config({"experiment": {"run_name": "local"}})
    for step, s in STEPS.items():
        n = len(s["returns"])
        tracker.log(with_seed_names({
            "reward/mean": sum(s["returns"]) / n, "reward/resolved_rate": sum(s["resolved"]) / n,
            "planner_parse_error_rate": sum(s["parse_errors"]) / sum(s["turns"]), "loss": s["pg_loss"] + 0.05,
            "pg_loss": s["pg_loss"], "entropy": s["entropy"], "grad_norm": s["grad_norm"], "lr": 1e-5}), step)
    tracker.finish()
    return run_dir


RUNS = {"verl": verl_run, "local": local_run}


@pytest.mark.parametrize("engine", list(RUNS))
def test_curve_points_are_the_same_panels_and_points_on_either_engine(tmp_path: Path, engine: str) -> None:
    points = curve_points(read_step_metrics(RUNS[engine](tmp_path) / "metrics.jsonl"))
    assert list(points) == list(CURVES)
    assert {panel: [(step, pytest.approx(value)) for step, value in got] for panel, got in points.items()} == EXPECTED


def test_verl_score_feeds_the_reward_panel_when_a_step_has_no_episode_metrics() -> None:
    points = curve_points({3: {"critic/score/mean": 0.4, "actor/grad_norm": float("nan")}})
    assert points["reward/mean"] == [(3, 0.4)]
    assert points["grad_norm"] == []  # a non-finite value is no point


@pytest.mark.parametrize("engine", list(RUNS))
def test_plot_training_curves_draws_every_panel_into_a_png(tmp_path: Path, engine: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = RUNS[engine](tmp_path)
    drawn: list[dict] = []
    real = plots.training_curves_figure

    def spy(series, run_name):
        drawn.append({k: list(v) for k, v in series.items()})
        return real(series, run_name)

    monkeypatch.setattr(plots, "training_curves_figure", spy)
    png = plot_training_curves(run_dir, engine)
    assert png == run_dir / TRAINING_CURVES and png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    assert [name for name, pts in drawn[0].items() if pts] == list(CURVES)  # all six panels have points


def _fake_verl_job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[RunConfig, Path]:
    """A verl run whose job 'ran' (metrics.jsonl by the bridge, an HF model under checkpoints/): no Ray."""
    from graph_planner.training.ray import job as ray_job

    run_dir = verl_run(tmp_path)
    hf = run_dir / "checkpoints" / "global_step_2" / "actor" / "huggingface"
    hf.mkdir(parents=True)
    (hf / "model.safetensors").write_bytes(b"")
    (run_dir / RESOLVED_CONFIG).write_text("experiment: {run_name: verl}\n")
    monkeypatch.setattr(ray_job, "write_job_config", lambda config: run_dir / "verl" / "job_config.yaml")
    monkeypatch.setattr(ray_job, "run_training_job", lambda config, args, dry_run, sink, submit: ray_job.JobOutcome(
        ray_job.EXIT_SUCCEEDED, "job-1", "http://fake:8265"))
    return run_config(tmp_path, "verl"), run_dir


def test_a_verl_run_names_its_curves_and_gp_train_prints_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from graph_planner.training import api
    from graph_planner.training.commands import report

    config, run_dir = _fake_verl_job(monkeypatch, tmp_path)
    outcome = api._train_verl(config, run_dir, SimpleNamespace(train=str(tmp_path / "t.parquet"), val=None),
                              False, None, None, None)
    assert outcome.ok and outcome.curves_png == run_dir / TRAINING_CURVES and outcome.curves_png.is_file()
    assert report(outcome) == 0
    assert f"; curves {run_dir / TRAINING_CURVES}" in capsys.readouterr().out


def test_the_eval_report_finds_a_verl_runs_curves_from_its_model(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """As the pipeline does: the trained model (verl's global_step_<k>/actor/huggingface) leads back to its run."""
    from test_report_artifact import _eval_dir

    from graph_planner.training import api
    from tasks.evaluation import producing_run_dir, report_artifact_markdown

    config, run_dir = _fake_verl_job(monkeypatch, tmp_path)
    outcome = api._train_verl(config, run_dir, SimpleNamespace(train=str(tmp_path / "t.parquet"), val=None),
                              False, None, None, None)
    found = producing_run_dir(outcome.model_dir, tmp_path / "elsewhere") / TRAINING_CURVES
    assert found == outcome.curves_png and found.is_file()
    markdown = report_artifact_markdown(config, str(run_dir / RESOLVED_CONFIG), _eval_dir(tmp_path / "e"),
                                        str(outcome.model_dir), found)
    assert "### Training curves" in markdown and "![Training curves](data:image/png;base64," in markdown


def _raise(*_args, **_kwargs):
    raise ValueError("matplotlib broke")


@pytest.mark.parametrize("engine", list(RUNS))
def test_a_plot_error_is_a_warning_and_no_png_on_either_engine(tmp_path: Path, engine: str,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    from graph_planner.training.local import run as local_run_module

    assert local_run_module.plot_training_curves is plot_training_curves  # the local engine draws with it too
    run_dir = RUNS[engine](tmp_path)
    monkeypatch.setattr(plots, "training_curves_figure", _raise)
    with caplog.at_level(logging.WARNING, logger=curves.__name__):
        assert plot_training_curves(run_dir, engine) is None
    assert "training curves" in caplog.text and "matplotlib broke" in caplog.text
    assert not (run_dir / TRAINING_CURVES).exists()


def test_a_verl_run_survives_a_plot_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          caplog: pytest.LogCaptureFixture) -> None:
    from graph_planner.training import api

    config, run_dir = _fake_verl_job(monkeypatch, tmp_path)
    monkeypatch.setattr(plots, "training_curves_figure", _raise)
    with caplog.at_level(logging.WARNING, logger=curves.__name__):
        outcome = api._train_verl(config, run_dir, SimpleNamespace(train=str(tmp_path / "t.parquet"), val=None),
                                  False, None, None, None)
    assert outcome.ok and outcome.curves_png is None and outcome.model_dir is not None
    assert "matplotlib broke" in caplog.text


def test_a_full_disk_is_not_swallowed_as_a_plot_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gp exits 5 on a full disk (graph_planner.disk); the curves' guard is for drawing errors only."""
    run_dir = local_run(tmp_path)

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(run_dir / TRAINING_CURVES))

    monkeypatch.setattr(plots, "save_figure", full)
    with pytest.raises(OSError, match="No space left"):
        plot_training_curves(run_dir, "local")


@pytest.mark.parametrize("engine", list(RUNS))
def test_the_learning_curve_reads_the_grad_norm_through_the_alias_table(tmp_path: Path, engine: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from graph_planner.training import learning_curve

    run_dir = RUNS[engine](tmp_path)
    monkeypatch.setattr(learning_curve, "train_through_api", lambda config: run_dir)
    config = load_run_config(None, {"training.sft.enabled": False, "training.backend": engine})
    assert learning_curve.run_learning(config, window=1)["grad_norm"] == [0.7, 0.4]
    # one table: a name added to CURVES reaches the learning curve (no second spelling of the aliases there)
    with (run_dir / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"kind": "metrics", "step": 3, "metrics": {"reward/mean": 1.0, "new/grad_norm": 0.2}})
                 + "\n")
    monkeypatch.setitem(CURVES, "grad_norm", (*CURVES["grad_norm"], "new/grad_norm"))
    assert learning_curve.run_learning(config, window=1)["grad_norm"] == [0.7, 0.4, 0.2]


def test_the_learning_curve_reports_a_metric_the_engine_did_not_log_as_null_not_zero(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step without ``advantage/abs_mean`` (a verl run from before graph_planner/training/verl/compat.py added
    it; the fixture's bridge input has only verl's ``critic/*``): the curve must not show a 0.0 there, which reads
    as a run that learned nothing."""
    from graph_planner.training import learning_curve

    run_dir = verl_run(tmp_path)
    with (run_dir / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"kind": "metrics", "step": 3, "metrics": {"reward/mean": 1.0,
                                                                       "advantage/abs_mean": 0.51234}}) + "\n")
    monkeypatch.setattr(learning_curve, "train_through_api", lambda config: run_dir)
    config = load_run_config(None, {"training.sft.enabled": False, "training.backend": "verl"})
    assert learning_curve.run_learning(config, window=1)["advantage_abs_mean"] == [None, None, 0.5123]
