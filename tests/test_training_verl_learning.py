"""The verl learning-regression test: configs/experiments/local_verl_learning.yaml (trajectory SFT warm start on
rule-policy episodes, then verl 0.9.1's real main_ppo GRPO as a Ray job on a private local head, CPU, with the
oracle synthesiser, real local sandboxes and real tests) raises the training reward.

It is ``benchmarks/env_learning.py --backend verl`` on one seed (graph_planner/training/learning_curve.py), with
the benchmark's 10 steps, run beside the rest of the suite (tests/verl_learning_job.py): 6 steps (first 3 vs last 3)
do not carry the signal (seed 0's measured curve rose +0.013 over its first 6 steps and +0.118 over 10). SFT 1-4 min,
Ray and verl start-up ~2 min, a step 30-45 s on an idle 2-core machine (70-170 s at load average 40).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from verl_learning_job import STASH, STEPS, start

pytestmark = [pytest.mark.ray, pytest.mark.slow]

#: see the test's docstring
RISE_BOUND = 0.0


@pytest.fixture(scope="module")
def verl_learning(request, tmp_path_factory):
    """SFT then ``STEPS`` verl GRPO steps, seed 0, from a fresh data / run dir: learning_curve's result dict. The
    run started beside the suite when collection ended (tests/verl_learning_job.py), or now."""
    own = None if STASH in request.config.stash else start(tmp_path_factory.mktemp("verl_learning"))
    done = (own or request.config.stash[STASH]).result()
    assert done.returncode == 0, f"the verl learning run failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    (result,) = json.loads(done.stdout)["seeds"]
    yield result
    if own is not None:
        own.stop()


def test_verl_grpo_raises_the_training_reward_from_the_sft_model(verl_learning) -> None:
    """verl GRPO learns on the env: every step's groups differ in reward (std > 0) and move the policy (grad norm
    > 0); the SFT model's actions parse in verl's multi-turn sequence (parse errors < 50 % at step 1; without
    ``training.attention_window`` they were 79 %, and the reward stayed at -0.19 .. -0.16 over 10 steps);
    the mean reward of the last ``WINDOW`` steps exceeds the first ``WINDOW`` (``RISE_BOUND`` 0).

    The bound: this run is deterministic on a machine (per-request sampling seeds; the same curve idle and at load
    ~9). Its curve differs between machine types (their SFT models differ). Measured with
    ``benchmarks/env_learning.py --backend verl --seeds 0`` (the same function, seed and steps as this test):
    +0.066 on one machine type (before docs/training.md items 6-7); on a second, 0.000 before items 6-7 (this test
    failed there: first 5 = last 5 = 0.0767), +0.073 with the observation cut (item 6) and +0.129 with the windowed
    SFT model too (item 7; seeds 1 and 2 there: +0.071, +0.074). With the hf rollout's lockstep rounds (2026-11-29,
    a third machine type): +0.205, the same curve in four runs at different loads. A loop that does not learn gives
    0 +- ~0.035 (a step's 32 episodes have reward std ~0.3, tasks correlated: ~0.025 per 5-step mean); the unwindowed verl path rose +0.011
    at 79 % parse errors, which the parse-error check catches. The bound stays at the direction, 0: seed 0 with
    items 6-7 is measured on one machine type only, and CI may run on either; raise it once both are measured
    (docs/training.md, "Learning on verl").
    """
    result = verl_learning
    assert result["backend"] == "verl" and result["steps"] == STEPS, result
    assert all(std > 0 for std in result["reward_std"]), result["reward_std"]
    assert all(g > 0 for g in result["grad_norm"]), result["grad_norm"]
    # the advantages verl trained on, under the local engine's name (graph_planner/training/verl/compat.py)
    assert all(a is not None and a > 0 for a in result["advantage_abs_mean"]), result["advantage_abs_mean"]
    assert result["parse_error_first"] < 0.5, result
    assert result["rise"] > RISE_BOUND, result


def test_the_verl_run_leaves_an_hf_model_the_report_can_evaluate(verl_learning) -> None:
    """The GRPO column of the before/after table evaluates the job's final model: an HF dir verl wrote."""
    from graph_planner.config.checkpoints import latest_verl_model

    model = latest_verl_model(Path(verl_learning["run_dir"]) / "checkpoints")
    assert model is not None and (model / "config.json").is_file(), verl_learning["run_dir"]
