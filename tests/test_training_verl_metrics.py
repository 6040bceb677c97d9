"""``advantage/abs_mean`` on the verl engine (graph_planner/training/verl/compat.py): verl's own data metrics, as
its trainer computes them every step, gain the local engine's mean |advantage| over trajectories, from the
advantages verl trained on. The job's processes get it through ``VERL_USE_EXTERNAL_MODULES``; the real job is
checked in test_training_verl_job.py (the name in every step's metrics) and test_training_verl_learning.py (> 0)."""

from __future__ import annotations

import os
import subprocess
import sys

import torch
from verl import DataProto
from verl.trainer.ppo import metric_utils

from graph_planner.training.verl import compat


def grpo_batch(advantages: list[float], lengths: list[int], width: int = 4) -> DataProto:
    """Rows as verl's trainer has them after GRPO: each row's advantage on its response tokens, 0 on padding."""
    mask = torch.tensor([[1.0] * n + [0.0] * (width - n) for n in lengths])
    adv = torch.tensor(advantages).unsqueeze(-1) * mask
    rows = len(lengths)
    return DataProto.from_dict(tensors={
        "advantages": adv, "returns": adv.clone(), "response_mask": mask,
        "token_level_scores": torch.zeros(rows, width), "token_level_rewards": torch.zeros(rows, width),
        "prompts": torch.ones(rows, 3, dtype=torch.long), "responses": torch.ones(rows, width, dtype=torch.long),
        "attention_mask": torch.cat([torch.ones(rows, 3), mask], dim=-1)})


def test_the_mean_is_over_trajectories_not_tokens_and_ignores_padding():
    # a long row must not weigh more than a short one: (1.0 + 0.5 + 0.5) / 3, not a token-weighted mean
    batch = grpo_batch([1.0, -0.5, 0.5], lengths=[4, 1, 2])
    assert compat.advantage_abs_mean(batch) == torch.tensor(2.0 / 3).item()
    assert compat.advantage_abs_mean(grpo_batch([0.0, 0.0], lengths=[2, 3])) == 0.0  # groups that teach nothing


def test_verls_data_metrics_gain_it_once_where_its_trainer_looks_them_up(monkeypatch):
    from verl.trainer.ppo import ray_trainer

    # verl's own function, bound in both places, as before compat ran (importing compat ran it in this process)
    original = getattr(metric_utils.compute_data_metrics, "__wrapped__", metric_utils.compute_data_metrics)
    monkeypatch.setattr(metric_utils, "compute_data_metrics", original)
    monkeypatch.setattr(ray_trainer, "compute_data_metrics", original)
    assert compat.add_advantage_abs_mean() is True
    assert compat.add_advantage_abs_mean() is False  # wrapped once however often compat runs
    metrics = ray_trainer.compute_data_metrics(batch=grpo_batch([1.0, -1.0], lengths=[2, 2]), use_critic=False)
    assert metrics[compat.ADVANTAGE_ABS_MEAN] == 1.0
    assert metrics["critic/advantages/mean"] == 0.0  # verl's own metrics are kept


def test_a_verl_process_loading_the_projects_modules_gets_it_before_the_trainer_binds_the_name():
    """As in the job: ``VERL_USE_EXTERNAL_MODULES`` names compat, ``import verl`` loads it, main_ppo's trainer
    imports ``compute_data_metrics`` afterwards and gets the wrapped one."""
    code = ("import verl\nfrom verl.trainer.ppo import ray_trainer\n"
            "print(getattr(ray_trainer.compute_data_metrics, 'adds_advantage_abs_mean', False))")
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "graph_planner.training.verl.compat"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True", out.stdout
