"""Learning signal on the real env (no fakes: real sandboxes, real tests, the toy HF model, TRL SFT, verl's GRPO
math): after the SFT warm start of configs/experiments/local_learning.yaml the planner localises and resolves some
training tasks with the oracle synthesiser, and GRPO gets a signal to learn from.

Before the warm start every number of a local GRPO run was flat (parse error rate 1.0, reward std 0, advantages
0, grad norm 0): a random toy model never writes a valid action, so every rollout got the same reward. This test
guards the fix: after SFT most outputs parse, the planner commits gold code (M recall > 0), rewards differ within
GRPO groups, and the update has a non-zero gradient. Whether the GRPO phase itself raises the mean reward is
measured over seeds by benchmarks/env_learning.py (docs/training.md, "Learning demo"): one short CI run is too
noisy to assert it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_planner.config.loader import load_run_config
from graph_planner.env.samples import SAMPLE_DIR
from graph_planner.training.learning_curve import run_learning

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "experiments" / "local_learning.yaml"
STEPS = 2


@pytest.mark.slow
def test_sft_warm_start_gives_grpo_a_learning_signal(tmp_path):
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
    result = run_learning(config, window=1)

    assert result["steps"] == STEPS and result["sft"]["examples"] > 0
    # the SFT model writes valid actions (the base toy model writes none: rate 1.0) and finds gold code
    assert result["parse_error_first"] < 0.5, result
    assert result["loc_m_recall"][0] > 0, result
    # GRPO has something to learn from: rewards differ inside groups, advantages and the gradient are non-zero
    assert result["reward_std"][0] > 0 and result["advantage_abs_mean"][0] > 0 and result["grad_norm"][0] > 0, result
