"""Inputs that make a run meaningless are refused in one line with exit 2, before anything starts: a GRPO group of
one (its advantage compares the rollouts of one task: always 0), non-finite numbers anywhere in the config, and a
model path that is neither 'toy', a directory, nor a hub id (offline: one in the local cache). `gp preflight`
checks the model paths too (exit 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config.loader import ConfigError, load_run_config
from graph_planner.config.model_paths import model_path_problem


@pytest.mark.parametrize(("setting", "expected"), [
    ("training.group_size=1", "training.group_size (1) must be >= 2 with adv_estimator=grpo"),
    ("training.lr=inf", "training.lr: Input should be a finite number (got 'inf')"),
    ("training.lr=.nan", "training.lr: Input should be a finite number (got nan)"),
    ("env.step_penalty=.inf", "env.step_penalty: Input should be a finite number"),
    ("verl_overrides.actor_rollout_ref.actor.optim.lr=.inf", "not a finite number (got inf)"),
])
def test_meaningless_numbers_are_refused_with_exit_2(tmp_path, setting, expected):
    result = CliRunner().invoke(app, ["train", "--output-dir", str(tmp_path / "runs"), "--set", setting])
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()


def test_group_size_one_is_fine_without_a_group_estimator():
    config = load_run_config(None, {"training.backend": "verl", "training.adv_estimator": "reinforce_plus_plus",
                                    "training.group_size": 1})
    assert config.training.group_size == 1
    with pytest.raises(ConfigError, match="group_size"):
        load_run_config(None, {"training.backend": "verl", "training.adv_estimator": "rloo", "training.group_size": 1})


def test_model_paths_that_cannot_load_are_named(tmp_path, monkeypatch):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (tmp_path / "weights.bin").write_bytes(b"")
    assert model_path_problem("paths.planner_model", "toy") is None
    assert model_path_problem("paths.planner_model", str(model_dir)) is None
    assert "is a file" in model_path_problem("paths.planner_model", str(tmp_path / "weights.bin"))
    assert "does not exist (not a directory, and not a valid HF hub id)" in \
        model_path_problem("paths.planner_model", "/nonexistent")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "not in the local HF cache (HF_HUB_OFFLINE is set)" in \
        model_path_problem("paths.planner_model", "no-such-org/no-such-model")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert model_path_problem("paths.planner_model", "no-such-org/no-such-model") is None  # online: the hub decides


@pytest.mark.parametrize("command", ["train", "eval"])
def test_a_missing_planner_model_is_one_line_before_anything_loads(tmp_path, command, bundled_samples):

    if command == "eval":
        dataset = bundled_samples / "swebench" / "test.jsonl"
        args = ["eval", "--dataset", str(dataset)]
    else:
        args = ["train"]
    result = CliRunner().invoke(app, [*args, "--output-dir", str(tmp_path / "runs"), "--model-path",
                                      "/nonexistent"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) <= 2 and "paths.planner_model='/nonexistent': does not exist" in result.output, result.output
    assert not (tmp_path / "runs").exists()


def test_preflight_checks_the_model_paths(tmp_path):
    bad = CliRunner().invoke(app, ["preflight", "--set", f"paths.planner_model={tmp_path / 'gone'}"])
    assert bad.exit_code == 1 and "preflight failed" in bad.output and "does not exist" in bad.output
    good = CliRunner().invoke(app, ["preflight", "--set", f"paths.planner_model={Path(tmp_path)}"])
    assert good.exit_code == 0, good.output
