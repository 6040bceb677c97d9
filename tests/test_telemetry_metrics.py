"""The seed's metric names and values, and the telemetry.* switches that gate them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from graph_planner.config.schema import RunConfig
from graph_planner.episode.turns import Trajectory, Turn
from graph_planner.telemetry.metrics import episode_metrics, parallel_metrics, passthrough


def _turn(parse_error: str | None = None) -> Turn:
    return Turn(prompt_messages=[], response_text="", action=None, observation="", parse_error=parse_error)


def _batch() -> list[Trajectory]:
    return [
        Trajectory("a", turns=[_turn(), _turn("bad-json")], reward=1.0, resolved=True,
                   info={"patch_stats": {"generated": 2, "applied": 1, "rejected": {"syntax_error": 1}}}),
        Trajectory("b", turns=[_turn("unknown-action"), _turn(), _turn()], reward=0.0,
                   info={"patch_stats": {"generated": 3, "applied": 0,
                                         "rejected": {"syntax_error": 2, "outside_repo": 1}}}),
        Trajectory("c", turns=[_turn(), _turn(), _turn()], reward=-0.5),  # no repair attempted
    ]


def test_parallel_metrics_use_the_seed_names() -> None:
    config = RunConfig.model_validate({
        "parallel": {"tensor_parallel_planner": 2, "tensor_parallel_cgm": 4, "replicas": 1, "parallel_agents": 8,
                     "rollout_workers": 4, "workflow_parallel": 8},
        "resources": {"num_gpus": 8, "ray_num_gpus": 8, "ray_num_cpus": 32},
    })
    assert parallel_metrics(config) == {
        "parallel/tensor_parallel_planner": 2.0, "parallel/tensor_parallel_cgm": 4.0, "parallel/replicas": 1.0,
        "parallel/agents": 8.0, "parallel/workers": 4.0, "parallel/workflow_parallel": 8.0,
        "resources/num_gpus": 8.0, "resources/ray_gpus": 8.0, "resources/ray_cpus": 32.0,
    }


def test_episode_metrics_hand_computed() -> None:
    m = episode_metrics(_batch(), seconds=30.0, switches=RunConfig().telemetry)
    assert m["episodes"] == 3 and m["episodes_per_min"] == pytest.approx(6.0)
    assert m["reward/mean"] == pytest.approx(0.5 / 3)
    assert m["reward/std"] == pytest.approx(math.sqrt(((1 - 1 / 6) ** 2 + (1 / 6) ** 2 + (2 / 3) ** 2) / 3))
    assert m["patch_success_rate"] == pytest.approx(1 / 3)
    assert (m["patch_generated"], m["patch_applied"], m["patch_rejected"]) == (5.0, 1.0, 4.0)
    assert m["reject/syntax_error"] == 3.0 and m["reject/outside_repo"] == 1.0
    assert m["planner_parse_error_rate"] == pytest.approx(2 / 8)


@pytest.mark.parametrize(
    ("switch", "gone"),
    [
        ("log_patch_stats", {"patch_success_rate", "patch_generated", "patch_applied", "patch_rejected"}),
        ("log_cgm_errors", {"reject/syntax_error", "reject/outside_repo"}),
        ("log_planner_parse_errors", {"planner_parse_error_rate"}),
    ],
)
def test_telemetry_switch_off_drops_only_its_keys(switch: str, gone: set[str]) -> None:
    full = episode_metrics(_batch(), 30.0, RunConfig().telemetry)
    off = episode_metrics(_batch(), 30.0, RunConfig.model_validate({"telemetry": {switch: False}}).telemetry)
    assert gone <= set(full)
    assert set(full) - set(off) == gone


def test_episode_metrics_empty_batch_and_bad_inputs() -> None:
    assert episode_metrics([], 10.0, RunConfig().telemetry) == {"episodes": 0.0, "episodes_per_min": 0.0}
    with pytest.raises(ValueError, match="seconds must be > 0"):
        episode_metrics(_batch(), 0.0, RunConfig().telemetry)
    broken = Trajectory("task-7", info={"patch_stats": {"generated": 1, "rejected": ["syntax_error"]}})
    with pytest.raises(TypeError, match="task-7.*rejected"):
        episode_metrics([broken], 1.0, RunConfig().telemetry)


def test_passthrough_keeps_verl_names_and_scalars_only() -> None:
    verl = {
        "actor/pg_loss": np.float32(0.25),
        "critic/score/mean": torch.tensor(0.5),
        "perf/throughput": 1234,
        "training/global_step": 3,
        "response_length/clip_ratio": True,
        "agent_loop/slowest/raw": [1, 2, 3],
        "val-core/swe/reward/mean@4": np.array([0.1, 0.2]),
    }
    assert passthrough(verl) == {
        "actor/pg_loss": 0.25, "critic/score/mean": 0.5, "perf/throughput": 1234.0,
        "training/global_step": 3.0, "response_length/clip_ratio": 1.0,
        "train/policy_loss": 0.25,  # seed 000 section 5 name of actor/pg_loss
    }


def test_passthrough_adds_the_seed_names_to_verl_metrics():
    from graph_planner.telemetry.metrics import passthrough as verl_passthrough

    got = verl_passthrough({"actor/entropy": 1.5, "actor/pg_loss": -0.2, "actor/pg_clipfrac": 0.1,
                            "actor/kl_loss": 0.01, "actor/grad_norm": 2.0, "critic/vf_loss": 0.3, "actor/lr": 1e-6})
    assert (got["train/entropy"], got["train/policy_loss"], got["train/clipfrac"], got["train/kl"],
            got["train/grad_norm"], got["train/value_loss"], got["lr"]) == (1.5, -0.2, 0.1, 0.01, 2.0, 0.3, 1e-6)
    assert "train/value_loss" not in verl_passthrough({"actor/entropy": 1.0})


def test_verl_job_tracker_logs_the_seed_names(tmp_path):
    """The verl job's env imports telemetry.verl_names with `import verl` (VERL_USE_EXTERNAL_MODULES); verl's own
    Tracking then logs train/* next to actor/* (console backend here, the same call feeds W&B)."""
    import os
    import subprocess
    import sys

    from graph_planner.config import load_run_config
    from graph_planner.training.ray.job import Cluster, job_runtime_env, prepare_job

    env_vars = job_runtime_env(load_run_config(None, {}))["env_vars"]
    code = ("from verl.utils.tracking import Tracking\n"
            "Tracking(project_name='p', experiment_name='e', default_backend='console').log("
            "{'actor/entropy': 1.25, 'actor/pg_clipfrac': 0.5, 'critic/vf_loss': 0.75}, step=3)\n")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env_vars, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    for name, value in (("train/entropy", "1.25"), ("train/clipfrac", "0.5"), ("train/value_loss", "0.75")):
        assert f"{name}:{value}" in done.stdout, done.stdout
    cpu = prepare_job(load_run_config(None, {}), ["--config-file", "c.yaml"], Cluster("http://x", cpu_platform=True))
    assert cpu.runtime_env["env_vars"]["VERL_USE_EXTERNAL_MODULES"] == \
        "graph_planner.telemetry.verl_names,graph_planner.training.verl.compat,graph_planner.training.verl.hf_rollout," \
        "graph_planner.training.verl.cpu"
