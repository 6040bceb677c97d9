"""Learning regression on the real env (no fakes: real sandboxes, real tests, the toy HF model, TRL SFT, verl's
GRPO math): after the SFT warm start of configs/experiments/local_learning.yaml, the GRPO phase itself must raise
the mean episode reward, with the signals a healthy GRPO run has (reward spread, advantages, gradients).

One seed, a short run (the benchmark, benchmarks/env_learning.py, runs 3 seeds and longer). The thresholds are
conservative on purpose, below what the benchmark measured for every seed (docs/benchmarks.md):
- the mean reward of the last GRPO steps exceeds that of the first ones by more than ``MIN_RISE``: the only
  positive reward is resolving a task (+1), and with the oracle synthesiser that needs the right code in memory
  M, so a rise means GRPO made the planner localise and act better; penalties alone (step 0.01, format 0.05)
  cannot make the mean rise by that much without fewer invalid outputs or more resolved tasks;
- reward std, advantage magnitude and grad norm are non-zero at some step (they were all 0 before this work).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_planner.config.loader import load_run_config
from graph_planner.env.samples import SAMPLE_DIR
from graph_planner.training.learning_curve import run_learning

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "experiments" / "local_learning.yaml"
STEPS = 8
WINDOW = 3
MIN_RISE = 0.05


@pytest.mark.slow
def test_grpo_raises_the_env_reward_after_the_sft_warm_start(tmp_path):
    from graph_planner.data.prepare import prepare_datasets

    data = tmp_path / "prepared"
    prepared = load_run_config(CONFIG, {"data.r2e_dataset": str(SAMPLE_DIR / "r2e" / "train.jsonl"),
                                        "data.swebench_dataset": str(SAMPLE_DIR / "swebench" / "test.jsonl"),
                                        "data.repos_dir": str(SAMPLE_DIR / "repos")})
    prepare_datasets(prepared.data, out_dir=data)
    config = load_run_config(CONFIG, {
        "experiment.run_name": "learning-ci", "logging.output_dir": str(tmp_path / "runs"),
        "logging.log_backend": "jsonl", "paths.cache_dir": str(tmp_path / "cache"),
        "paths.dataset_train": str(data / "r2e_gym" / "train.jsonl"), "paths.data_dir": str(data / "r2e_gym"),
        "training.total_steps": STEPS, "training.total_epochs": STEPS})
    result = run_learning(config, window=WINDOW)

    assert result["steps"] == STEPS and result["sft"]["examples"] > 0
    assert result["rise"] > MIN_RISE, result
    assert max(result["reward_std"]) > 0 and max(result["advantage_abs_mean"]) > 0 and max(result["grad_norm"]) > 0
    assert result["parse_error_first"] < 1.0, "the SFT warm start must teach the action format"
