"""Telemetry never fails a run: the Prefect artifact API unreachable for part of a training step leaves the step
COMPLETED with the same checkpoint, with a warning, a "reachable again" and a summary of what failed; a tracker
(W&B, tensorboard) that raises is a warning, while metrics.jsonl (the run's own record) still fails loudly.

The training runs for real (toy model) with the scripted rollout of tests/test_run_dirs.py; the API outage is
simulated by making Prefect's artifact calls raise httpx.ConnectError (a real server cannot be stopped and
restarted under the session's test harness)."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from pathlib import Path

import httpx
import pytest
from prefect import flow
from test_run_dirs import PromptTask, scripted_rollout

from flows.run_stats import settled_task_runs
from graph_planner.config.loader import load_run_config
from graph_planner.telemetry.best_effort import BestEffort
from graph_planner.telemetry.trackers import InMemoryTracker, MultiTracker


@flow(name="train-step-best-effort")
def train_step_only(config_file: str, registry: str) -> str:
    from tasks.training import run_training

    return run_training(config_file, registry)


def _weights_digest(model_dir: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(model_dir.glob("*.safetensors")):
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _train(tmp_path: Path, name: str) -> tuple[object, Path]:
    config = load_run_config(None, {
        "logging.output_dir": str(tmp_path / "runs"), "experiment.run_name": name, "training.total_steps": 4,
        "training.total_epochs": 10, "training.train_batch_size": 2, "training.ppo_mini_batch_size": 2,
        "training.group_size": 2, "logging.save_interval": 2, "training.torch_threads": 1,
        "logging.log_backend": "jsonl"}, write=True)
    state = train_step_only(config.resolved_config_path, str(tmp_path / "registry"), return_state=True)
    return state, Path(state.result()) if state.is_completed() else Path()


@pytest.mark.slow
def test_an_artifact_api_outage_during_training_leaves_the_step_completed_with_the_same_checkpoint(
        flow_workspace: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import torch

    import tasks.artifacts as artifacts
    from graph_planner.training.local import rollout

    monkeypatch.setattr(rollout, "make_env_rollout", lambda config: ([PromptTask(0), PromptTask(1)], scripted_rollout))
    threads = torch.get_num_threads()
    clean_state, clean = _train(flow_workspace, "clean")
    assert clean_state.is_completed(), clean_state

    calls: list[float] = []
    real_create, real_update = artifacts.create_progress_artifact, artifacts.update_progress_artifact

    def down_for_steps_1_and_2(real):
        def call(*args, progress: float, **kwargs):
            calls.append(progress)
            if progress in (25.0, 50.0):  # steps 1 and 2 of 4
                raise httpx.ConnectError("[Errno 111] Connection refused (simulated Prefect API outage)")
            return real(*args, progress=progress, **kwargs)
        return call

    monkeypatch.setattr(artifacts, "create_progress_artifact", down_for_steps_1_and_2(real_create))
    monkeypatch.setattr(artifacts, "update_progress_artifact", down_for_steps_1_and_2(real_update))
    monkeypatch.setattr(artifacts.ProgressArtifact, "__init__", _no_throttle(artifacts.ProgressArtifact.__init__))
    caplog.set_level(logging.WARNING, logger="graph_planner.telemetry.best_effort")
    state, checkpoint = _train(flow_workspace, "outage")
    torch.set_num_threads(threads)
    assert state.is_completed(), state
    runs = settled_task_runs(state.state_details.flow_run_id, settle_s=1.0, timeout_s=30.0)
    assert [r.state.type.value for r in runs if r.name.startswith("train")] == ["COMPLETED"]
    assert checkpoint.name == clean.name and checkpoint.parent.name == clean.parent.name == "step_4"
    assert _weights_digest(checkpoint) == _weights_digest(clean)
    assert 25.0 in calls and 50.0 in calls and 100.0 in calls, calls
    text = caplog.text
    assert "send failed (ConnectError" in text and "reachable again after 2 failed call(s)" in text, text
    assert "prefect artifacts: 2 sent, 2 failed (ConnectError)" in text, text


def _no_throttle(init):
    """Every step's update is sent (the 1 s throttle would merge the steps of a fast toy run)."""
    def patched(self, key, description, min_interval_s=1.0):
        init(self, key, description, min_interval_s=0.0)
    return patched


def test_a_hanging_sender_never_blocks_the_caller_and_close_is_bounded(caplog):
    release = threading.Event()
    sender = BestEffort("slow api")
    started = time.monotonic()
    sender.submit(release.wait, 30, key="bar")
    while not sender._busy:  # the first call is in flight (and hangs)
        time.sleep(0.01)
    for _ in range(4):
        sender.submit(release.wait, 30, key="bar")  # only the newest queued state is kept
    assert time.monotonic() - started < 1.0
    caplog.set_level(logging.WARNING)
    stats = sender.close(timeout=0.5)
    assert time.monotonic() - started < 5.0
    assert stats.dropped == 1 and "1 dropped" in caplog.text  # the one still queued when close gave up
    release.set()


def test_a_hanging_wandb_tracker_never_blocks_the_run_and_finish_is_bounded(caplog):
    """W&B / tensorboard calls go through a background sender: a server that never answers costs the training
    loop nothing, and finish() gives up after its bounded wait with a summary of what was dropped."""
    release = threading.Event()

    class Hanging(InMemoryTracker):
        def log(self, metrics, step):
            release.wait(30)

    memory = InMemoryTracker()
    caplog.set_level(logging.WARNING)
    multi = MultiTracker({"wandb": Hanging(), "memory": memory})
    multi.close_timeout = 0.5
    start = time.monotonic()
    for step in (1, 2, 3):
        multi.log({"loss": 0.5}, step)
    assert time.monotonic() - start < 2.0, "the loop waited on the hanging tracker"
    multi.finish()
    assert time.monotonic() - start < 10.0, "finish waited past its bound"
    release.set()
    assert [step for step, _ in memory.rows] == [1, 2, 3]
    assert "tracker wandb: 0 sent, 0 failed, 3 dropped" in caplog.text


def test_a_failing_telemetry_tracker_is_a_warning_but_the_jsonl_record_fails_the_run(caplog):
    class Broken(InMemoryTracker):
        def log(self, metrics, step):
            raise httpx.ConnectError("W&B unreachable (simulated)")

    memory = InMemoryTracker()
    caplog.set_level(logging.WARNING)
    multi = MultiTracker({"wandb": Broken(), "memory": memory})
    for step in (1, 2):
        multi.log({"loss": 0.5}, step)
    multi.finish()
    assert [step for step, _ in memory.rows] == [0, 1, 2][1:]  # the other trackers got every row
    assert "tracker wandb: send failed (ConnectError" in caplog.text
    assert "tracker wandb: 1 sent, 2 failed (ConnectError)" in caplog.text  # the one sent: its finish
    record = MultiTracker({"jsonl": Broken()})
    with pytest.raises(httpx.ConnectError):
        record.log({"loss": 0.5}, 1)
