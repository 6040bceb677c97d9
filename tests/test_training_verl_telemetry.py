"""The verl path's telemetry bridge (no Ray, no verl run): episodes recorded by agent-loop workers and verl's
``file`` logger lines become, per step, the seed metric names plus verl's own names in the run's trackers."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from graph_planner.config.loader import load_run_config
from graph_planner.episode.summary import EpisodeSummary
from graph_planner.training.verl.telemetry import (
    EPISODES_FILE,
    VERL_METRICS_FILE,
    VerlTelemetryBridge,
    record_episode,
)


def summary(task: str, ret: float, resolved: bool, parse_errors: int, steps: int,
            rejected: dict | None = None) -> EpisodeSummary:
    return EpisodeSummary(task, episode_return=ret, resolved=resolved, termination_reason="submitted",
                          steps=steps, parse_errors=parse_errors,
                          patch_stats={"generated": 1, "applied": 0, "rejected": rejected} if rejected else {})


def bridge_run(tmp_path: Path):
    """(config, run dir, episodes file) of a run whose only tracker is the JSONL one."""
    config = load_run_config(None, {"logging.output_dir": str(tmp_path), "experiment.run_name": "r",
                                    "logging.log_backend": "jsonl", "telemetry.log_ray": False,
                                    "telemetry.log_gpu": False})
    run_dir = tmp_path / "r"
    return config, run_dir, run_dir / "verl" / EPISODES_FILE


def test_bridge_logs_seed_names_per_step_from_worker_episodes_and_verl_lines(tmp_path):
    config, run_dir, episodes = bridge_run(tmp_path)
    verl_file = run_dir / "verl" / VERL_METRICS_FILE
    bridge = VerlTelemetryBridge(config, run_dir, poll_s=0.05).start()
    # four workers' threads append at once (weights version 0 -> training step 1)
    threads = [threading.Thread(target=record_episode, args=(episodes, 0, summary(f"t{i}", -0.1 * i, i == 0, i, 3,
                                                                                  {"touches-tests": 1}), 1.0))
               for i in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    record_episode(episodes, 1, summary("t9", 1.0, True, 0, 2), 1.0)  # generated for step 2
    verl_file.write_text(json.dumps({"step": 1, "data": {"actor/pg_loss": 0.5, "timing_s/gen": 30.0,
                                                         "critic/score/mean": -0.15, "note": "text"}}) + "\n")
    bridge.stop()

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = {row["step"]: row["metrics"] for row in rows if row.get("kind") == "metrics"}
    assert logged[0]["parallel/agents"] == 1.0  # layout at step 0
    step1 = logged[1]
    assert step1["episodes"] == 4.0 and step1["episodes_per_min"] == 8.0  # 4 episodes in verl's 30 s of gen
    assert step1["reward/mean"] == pytest.approx(-0.15) and step1["patch_success_rate"] == 0.25
    assert step1["planner_parse_error_rate"] == (0 + 1 + 2 + 3) / 12
    assert step1["reject/touches-tests"] == 4.0 and step1["patch_generated"] == 4.0
    assert step1["actor/pg_loss"] == 0.5 and "note" not in step1  # verl's names, scalars only
    assert 2 not in logged and bridge.pending[2][0]["summary"]["task_id"] == "t9"  # waits for verl's step-2 line


def test_a_resumed_run_reads_only_its_own_episodes(tmp_path):
    config, run_dir, episodes = bridge_run(tmp_path)
    record_episode(episodes, 0, summary("old", 0.0, False, 0, 1), 1.0)  # the first job's
    (run_dir / "verl" / VERL_METRICS_FILE).write_text('{"step": 1, "data": {}}\n')  # verl truncates it on start
    bridge = VerlTelemetryBridge(config, run_dir, poll_s=0.05).start()
    record_episode(episodes, 2, summary("new", 1.0, True, 0, 1), 1.0)
    Path(run_dir / "verl" / VERL_METRICS_FILE).write_text('{"step": 3, "data": {"actor/lr": 0.1}}\n')
    bridge.stop()
    assert bridge.logged_steps == [3]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    step3 = [row["metrics"] for row in rows if row.get("kind") == "metrics" and row["step"] == 3][0]
    assert step3["episodes"] == 1.0 and step3["reward/mean"] == 1.0
