"""Trackers: selection from the run config, JSONL / stdout / TensorBoard output read back, secrets kept out."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from graph_planner.config.loader import ConfigError, load_run_config
from graph_planner.config.schema import RunConfig
from graph_planner.telemetry.redact import is_secret_key, scrub, secret_values
from graph_planner.telemetry.trackers import (
    InMemoryTracker,
    JsonlTracker,
    MultiTracker,
    StdoutTracker,
    TensorboardTracker,
    make_tracker,
    selected_trackers,
)


def _config(tmp_path: Path, **logging: object) -> RunConfig:
    return RunConfig.model_validate({"logging": {"output_dir": str(tmp_path), **logging}})


def test_track_with_wins_over_log_backend_and_console_is_stdout(tmp_path: Path) -> None:
    assert selected_trackers(_config(tmp_path, log_backend="jsonl,tensorboard")) == ["jsonl", "tensorboard"]
    both = _config(tmp_path, log_backend="jsonl,tensorboard", track_with=["console", "stdout"])
    assert selected_trackers(both) == ["stdout"]


def test_wandb_enabled_adds_wandb_tracker(tmp_path: Path) -> None:
    config = _config(tmp_path, log_backend="jsonl", wandb={"enabled": True, "offline": True})
    assert selected_trackers(config) == ["jsonl", "wandb"]


def test_unknown_tracker_rejected_by_config() -> None:
    with pytest.raises(ConfigError, match="unknown tracker.*mlflow"):
        load_run_config(cli_overrides={"logging.log_backend": "stdout,mlflow"})


def test_jsonl_tracker_writes_one_flushed_line_per_call(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    tracker = JsonlTracker(path)
    tracker.log_config({"experiment": {"name": "x"}})
    tracker.log({"reward/mean": 0.5, "episodes_per_min": 3.0}, step=1)
    # readable before finish(): a crashed run keeps its metrics
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    tracker.finish()
    assert rows[0]["kind"] == "config" and rows[0]["config"] == {"experiment": {"name": "x"}}
    assert rows[1]["kind"] == "metrics" and rows[1]["step"] == 1
    assert rows[1]["metrics"] == {"reward/mean": 0.5, "episodes_per_min": 3.0}
    with pytest.raises(RuntimeError, match="finished"):
        tracker.log({"a": 1.0}, step=2)


def test_stdout_tracker_prints_one_compact_line_per_step() -> None:
    stream = io.StringIO()
    tracker = StdoutTracker(stream=stream)
    metrics = {f"reject/reason_{i}": float(i) for i in range(12)} | {"reward/mean": 0.123456}
    tracker.log(metrics, step=7)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1  # never wrapped, however many metrics
    assert lines[0].startswith("step 7 │ reject/reason_0 0 │ ")
    assert "reward/mean 0.1235" in lines[0]


def test_tensorboard_scalars_read_back_with_event_accumulator(tmp_path: Path) -> None:
    tracker = TensorboardTracker(tmp_path / "tb")
    tracker.log_config({"training": {"lr": 1e-5}})
    for step in range(3):
        tracker.log({"reward/mean": step * 0.25, "parallel/agents": 4.0}, step=step)
    tracker.finish()
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert {"reward/mean", "parallel/agents"} <= set(acc.Tags()["scalars"])
    assert [(e.step, e.value) for e in acc.Scalars("reward/mean")] == [(0, 0.0), (1, 0.25), (2, 0.5)]
    assert "config/text_summary" in acc.Tags()["tensors"]


def test_make_tracker_passes_tracker_kwargs_and_logs_config(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        log_backend="jsonl,tensorboard",
        tracker_kwargs={"jsonl": {"path": str(tmp_path / "custom.jsonl")}, "tensorboard": {"flush_secs": 5}},
    )
    with make_tracker(config) as tracker:
        tracker.log({"reward/mean": 1.0}, step=3)
    rows = [json.loads(line) for line in (tmp_path / "custom.jsonl").read_text().splitlines()]
    assert rows[0]["config"]["logging"]["log_backend"] == "jsonl,tensorboard"
    assert rows[1]["metrics"] == {"reward/mean": 1.0}
    run_dir = tmp_path / config.run_name
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))


def test_bad_tracker_kwargs_name_the_tracker(tmp_path: Path) -> None:
    config = _config(tmp_path, log_backend="stdout", tracker_kwargs={"stdout": {"colour": "red"}})
    with pytest.raises(TypeError, match="logging.tracker_kwargs.stdout"):
        make_tracker(config)


def test_multi_tracker_rejects_non_numeric_metric_naming_it() -> None:
    tracker = MultiTracker({"mem": InMemoryTracker()})
    with pytest.raises(TypeError, match="'note'"):
        tracker.log({"note": "hello"}, step=0)


def test_multi_tracker_keeps_last_step_and_is_thread_safe() -> None:
    mem = InMemoryTracker()
    tracker = MultiTracker({"mem": mem})
    tracker.log({"a": 1.0}, step=5)
    tracker.log({"gpu/0/util": 3.0})  # no step: logged at the last step (W&B rejects steps going back)
    assert mem.rows == [(5, {"a": 1.0}), (5, {"gpu/0/util": 3.0})]

    def hammer() -> None:
        for i in range(200):
            tracker.log({"x": float(i)}, step=5 + i)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(mem.rows) == 2 + 800 and tracker.last_step == 204
    tracker.finish()
    tracker.log({"late": 1.0}, step=300)  # after finish: dropped, not an error from a closed file
    assert len(mem.rows) == 802 and mem.finished


def test_secret_key_detection_spares_token_counts() -> None:
    for key in ("hf_token", "api_key", "WANDB_API_KEY", "db.password", "client_secret", "apiKey", "trainer.my_token"):
        assert is_secret_key(key, "value"), key
    for key in ("max_new_tokens", "planner_tokenizer", "stop_ids", "max_prompt_length"):
        assert not is_secret_key(key, 1), key
    assert not is_secret_key("planner_api_key_env", "PLANNER_API_KEY")  # names the env var, holds no secret
    assert is_secret_key("planner_api_key_env", "sk-live-123456")  # a key pasted in the wrong field


def test_scrub_removes_secret_keys_and_values_found_in_env(tmp_path: Path) -> None:
    config = RunConfig.model_validate({"data": {"hf_token": "hf_abcdefgh123"}})
    secrets = secret_values(config, env={"PLANNER_API_KEY": "sk-planner-999", "HOME": "/root"})
    assert secrets == {"hf_abcdefgh123", "sk-planner-999"}
    tree = {"notes": "key is sk-planner-999", "verl_overrides": {"trainer.wandb_token": "x"}, "lr": 1e-5}
    assert scrub(tree, secrets) == {"notes": None, "verl_overrides": {"trainer.wandb_token": None}, "lr": 1e-5}


def test_stdout_tracker_shows_in_console_alias(tmp_path: Path) -> None:
    """`track_with: [console]` (verl's name) prints the step line on stdout."""
    config = load_run_config(cli_overrides={"logging.output_dir": str(tmp_path),
                                            "logging.track_with": ["console", "tensorboard"]})
    stream = io.StringIO()
    config.logging.tracker_kwargs = {"console": {"stream": stream}}
    with make_tracker(config) as tracker:
        tracker.log({"reward/mean": 0.25}, step=4)
    assert "step 4 │ reward/mean 0.25" in stream.getvalue()


def test_run_telemetry_logs_layout_at_step_0_and_finishes(tmp_path: Path) -> None:
    from graph_planner.telemetry import run_telemetry

    config = _config(tmp_path, log_backend="jsonl")
    config.telemetry.heartbeat_interval_s = 60
    with run_telemetry(config) as tracker:
        tracker({"reward/mean": 0.5}, 1)  # the tracker is itself a log_fn(metrics, step)
    rows = [json.loads(line) for line in (tmp_path / config.run_name / "metrics.jsonl").read_text().splitlines()]
    metric_rows = [r for r in rows if r["kind"] == "metrics"]
    assert metric_rows[0]["step"] == 0 and metric_rows[0]["metrics"]["parallel/agents"] == 1.0
    assert {"reward/mean": 0.5} in [r["metrics"] for r in metric_rows if r["step"] == 1]
    with pytest.raises(RuntimeError, match="finished"):
        tracker.trackers["jsonl"].log({"a": 1.0}, 2)


def test_read_step_metrics_keeps_a_resumed_steps_last_values_and_skips_a_cut_line(tmp_path):
    from graph_planner.telemetry.trackers import JsonlTracker, read_step_metrics

    path = tmp_path / "metrics.jsonl"
    tracker = JsonlTracker(path)
    tracker.log_config({"lr": 1e-3})
    tracker.log({"reward/mean": 9.0}, 0)  # the config-dump step, not a training step
    tracker.log({"reward/mean": -0.2, "loss": 1.0}, 1)
    tracker.log({"reward/mean": 0.1}, 2)
    tracker.log({"reward/mean": 0.3}, 2)  # a resumed run logs step 2 again
    tracker.finish()
    with path.open("a", encoding="utf-8") as f:
        f.write('{"kind": "metrics", "step": 3, "metr')  # killed mid-write

    assert read_step_metrics(path) == {1: {"reward/mean": -0.2, "loss": 1.0}, 2: {"reward/mean": 0.3}}
