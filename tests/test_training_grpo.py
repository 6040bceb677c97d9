"""GRPO math (graph_planner.training.grpo, on verl core_algos) against hand computations on small tensors."""

from __future__ import annotations

import math

import pytest
import torch

from graph_planner.config.schema import TrainingConfig
from graph_planner.training import grpo

A, B = "task-a", "task-b"


def cfg(**kw) -> TrainingConfig:
    base = {"reward_norm_method": "none", "reward_norm_grouping": "group"}
    return TrainingConfig(**{**base, **kw})


def test_group_advantage_is_centred_and_std_scaled_per_group():
    adv = grpo.group_advantages(torch.tensor([1.0, 0.0, 0.5, 0.5]), [A, A, B, B], cfg())
    s = math.sqrt(0.5)  # unbiased std of [1, 0]
    assert adv.tolist() == pytest.approx([0.5 / (s + 1e-6), -0.5 / (s + 1e-6), 0.0, 0.0])


def test_dr_grpo_switches_std_normalisation_off():
    adv = grpo.group_advantages(torch.tensor([1.0, 0.0, 3.0, 1.0]), [A, A, B, B], cfg(norm_adv_by_std_in_grpo=False))
    assert adv.tolist() == pytest.approx([0.5, -0.5, 1.0, -1.0])


def test_roll_batch_mean_std_uses_whole_batch_statistics():
    out = grpo.normalize_rewards(torch.tensor([1.0, 0.0, 0.0, 0.0]), [A, A, B, B], "batch", "mean_std")
    # mean 0.25, unbiased std 0.5
    assert out.tolist() == pytest.approx([0.75 / 0.5, -0.25 / 0.5, -0.25 / 0.5, -0.25 / 0.5], rel=1e-5)


def test_roll_group_mean_and_identity():
    rewards = torch.tensor([2.0, 0.0, 5.0, 1.0])
    assert grpo.normalize_rewards(rewards, [A, A, B, B], "group", "mean").tolist() == [1.0, -1.0, 2.0, -2.0]
    assert grpo.normalize_rewards(rewards, [A, A, B, B], "batch", "none").tolist() == rewards.tolist()


def test_roll_state_grouping_follows_state_ids_not_groups():
    rewards = torch.tensor([1.0, 0.0, 3.0, 2.0])
    by_state = grpo.normalize_rewards(rewards, [A, A, B, B], "state", "mean", state_ids=["s", "t", "s", "t"])
    assert by_state.tolist() == [-1.0, -1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="state_ids"):
        grpo.normalize_rewards(rewards, [A, A, B, B], "state", "mean")


def test_roll_skips_std_for_singletons_and_equal_rewards():
    out = grpo.normalize_rewards(torch.tensor([3.0, 0.5, 0.5]), [A, B, B], "group", "mean_std")
    assert out.tolist() == [0.0, 0.0, 0.0]


def test_batch_normalisation_changes_advantages_when_groups_differ_in_scale():
    rewards = torch.tensor([1.0, 0.0, 10.0, 0.0])
    plain = grpo.group_advantages(rewards, [A, A, B, B], cfg(norm_adv_by_std_in_grpo=False))
    batch = grpo.group_advantages(rewards, [A, A, B, B],
                                  cfg(norm_adv_by_std_in_grpo=False, reward_norm_grouping="batch",
                                      reward_norm_method="mean_std"))
    assert plain.tolist() == pytest.approx([0.5, -0.5, 5.0, -5.0])
    std = torch.tensor([1.0, 0.0, 10.0, 0.0]).std().item()
    assert batch.tolist() == pytest.approx([0.5 / std, -0.5 / std, 5.0 / std, -5.0 / std], rel=1e-4)


def _two_token_row():
    old = torch.zeros(1, 2)
    new = torch.log(torch.tensor([[1.5, 0.5]]))
    return old, new, torch.ones(1, 2)


def test_clipped_loss_matches_hand_computation_with_clip_higher():
    old, new, mask = _two_token_row()
    loss, metrics = grpo.policy_loss(old, new, torch.tensor([1.0]), mask, cfg(clip_ratio_low=0.2, clip_ratio_high=0.28))
    # token 1: max(-1.5, -clip(1.5)=-1.28) = -1.28; token 2: max(-0.5, -clip(0.5)=-0.8) = -0.5
    assert loss.item() == pytest.approx((-1.28 - 0.5) / 2)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(0.5)
    symmetric, _ = grpo.policy_loss(old, new, torch.tensor([1.0]), mask, cfg(clip_ratio_low=0.2, clip_ratio_high=0.2))
    assert symmetric.item() == pytest.approx((-1.2 - 0.5) / 2)


def test_negative_advantage_clips_at_the_lower_ratio():
    old, new, mask = _two_token_row()
    loss, _ = grpo.policy_loss(old, new, torch.tensor([-1.0]), mask, cfg())
    # token 1: max(1.5, 1.28) = 1.5 (below dual clip 3.0); token 2: max(0.5, 0.8) = 0.8
    assert loss.item() == pytest.approx((1.5 + 0.8) / 2)


@pytest.mark.parametrize(("mode", "expected"), [
    ("token-mean", (-2 + 3) / 3),              # every unmasked token counts once
    ("seq-mean-token-mean", (-1 + 3) / 2),     # mean per row, then over rows
    ("seq-mean-token-sum", (-2 + 3) / 2),      # sum per row, then mean over rows
    ("seq-mean-token-sum-norm", (-2 + 3) / 2 / 8),  # ... divided by max_response_length
])
def test_loss_aggregation_modes(mode, expected):
    lp = torch.zeros(2, 2)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    adv = torch.tensor([1.0, -3.0])  # ratio 1 -> per-token loss = -A
    c = cfg(loss_agg_mode=mode, max_response_length=8)
    info = grpo.batch_info([2, 1], c)
    loss, _ = grpo.policy_loss(lp, lp, adv, mask, c, info)
    assert loss.item() == pytest.approx(expected)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batches_sum_to_the_mini_batch_loss(mode):
    torch.manual_seed(0)
    old, new = torch.randn(4, 3), torch.randn(4, 3)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1]]).float()
    adv = torch.tensor([1.0, -0.5, 2.0, -1.0])
    c = cfg(loss_agg_mode=mode)
    info = grpo.batch_info(mask.sum(-1).int().tolist(), c)
    full, _ = grpo.policy_loss(old, new, adv, mask, c, info)
    parts = [grpo.policy_loss(old[s], new[s], adv[s], mask[s], c, info)[0] for s in (slice(0, 1), slice(1, 4))]
    assert sum(p.item() for p in parts) == pytest.approx(full.item(), rel=1e-5)


def test_kl_low_var_estimator_and_entropy_by_hand():
    c = cfg(kl_loss_type="low_var_kl")
    kl = grpo.kl_term(torch.log(torch.tensor([[0.5]])), torch.log(torch.tensor([[0.25]])), torch.ones(1, 1), c)
    assert kl.item() == pytest.approx(0.5 - math.log(0.5) - 1)  # k3: r - log r - 1 with r = 0.25 / 0.5
    k1 = grpo.kl_term(torch.log(torch.tensor([[0.5]])), torch.log(torch.tensor([[0.25]])), torch.ones(1, 1),
                      cfg(kl_loss_type="kl"))
    assert k1.item() == pytest.approx(math.log(2))
    entropy = grpo.entropy_term(torch.zeros(1, 3, 4), torch.tensor([[1.0, 1.0, 0.0]]), c)
    assert entropy.item() == pytest.approx(math.log(4))


def test_total_loss_adds_kl_and_subtracts_entropy_only_when_enabled():
    pg, ent, kl = torch.tensor(1.0), torch.tensor(2.0), torch.tensor(3.0)
    assert grpo.total_loss(pg, cfg(), entropy=ent, kl=kl).item() == 1.0
    assert grpo.total_loss(pg, cfg(entropy_coef=0.1, kl_coef=0.5), entropy=ent, kl=kl).item() == pytest.approx(
        1.0 - 0.2 + 1.5)
