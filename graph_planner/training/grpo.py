"""GRPO math for the local backend, on verl's own ``core_algos`` so both backends optimise the same objective.

Tensors in, tensors out; no model, no I/O. The order of operations per step:

1. :func:`normalize_rewards` — ROLL-style reward normalisation. ``reward_norm_grouping`` picks the scope
   (``group``: trajectories of one task, ``batch``: the whole step, ``state``: trajectories that started from
   the same state) and ``reward_norm_method`` the transform (``mean_std``: (r - mean) / (std + eps), std skipped
   for singleton scopes or std < 1e-6; ``mean``: r - mean; ``none``: identity).
2. :func:`group_advantages` — verl ``compute_grpo_outcome_advantage`` on the normalised rewards:
   A_i = (r_i - mean_g) / (std_g + eps) with ``norm_adv_by_std_in_grpo``, else r_i - mean_g (Dr.GRPO).
3. :func:`policy_loss` — verl's ``vanilla`` clipped objective: per token
   max(-A * ratio, -A * clip(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)) (clip-higher when high > low,
   DAPO), dual-clip at ``clip_ratio_c`` for A < 0, aggregated with ``loss_agg_mode``.
4. :func:`kl_term` (when ``kl_coef`` > 0) and :func:`entropy_term`: verl ``kl_penalty`` / ``entropy_from_logits``
   aggregated with ``agg_loss``. Total: pg_loss - entropy_coef * entropy + kl_coef * kl (as verl's actor).

``global_batch_info`` (see :func:`batch_info`) makes micro-batch losses sum to the loss of the whole mini-batch,
which is what gradient accumulation needs (verl uses it the same way across data-parallel ranks).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import torch

from graph_planner.config.schema import TrainingConfig

#: ROLL skips the std division below this spread (all-equal rewards would otherwise explode).
STD_FLOOR = 1e-6
#: ROLL / RAGEN ``asym_clip``: mean_std normalised rewards clipped to [-1, 3] (punish less than reward).
ASYM_CLIP = (-1.0, 3.0)
EPSILON = 1e-6


def _scope_ids(
    n: int, grouping: str, group_ids: Sequence[Hashable], state_ids: Sequence[Hashable] | None
) -> list[Hashable]:
    if grouping == "batch":
        return [0] * n
    if grouping == "group":
        return list(group_ids)
    if grouping == "state":
        if state_ids is None:
            raise ValueError("training.reward_norm_grouping='state' needs state_ids (one state key per trajectory)")
        if len(state_ids) != n:
            raise ValueError(f"state_ids has {len(state_ids)} entries for {n} rewards")
        return list(state_ids)
    raise ValueError(f"training.reward_norm_grouping: unknown scope {grouping!r} (state | batch | group)")


def normalize_rewards(
    rewards: torch.Tensor,
    group_ids: Sequence[Hashable],
    grouping: str,
    method: str,
    state_ids: Sequence[Hashable] | None = None,
) -> torch.Tensor:
    """ROLL-style reward normalisation of a 1-D reward tensor within each scope (see the module docstring)."""
    if rewards.dim() != 1 or len(group_ids) != rewards.shape[0]:
        raise ValueError(f"rewards must be 1-D with one group id each; got shape {tuple(rewards.shape)} "
                         f"and {len(group_ids)} group ids")
    if method in ("none", "identity"):
        return rewards.clone()
    if method not in ("mean", "mean_std", "asym_clip"):
        raise ValueError(f"training.reward_norm_method: unknown method {method!r} "
                         "(mean_std | mean | none | identity | asym_clip)")
    scopes = _scope_ids(rewards.shape[0], grouping, group_ids, state_ids)
    out = rewards.clone().float()
    for scope in dict.fromkeys(scopes):
        idx = torch.tensor([i for i, s in enumerate(scopes) if s == scope])
        values = rewards[idx].float()
        centred = values - values.mean()
        if method in ("mean_std", "asym_clip") and len(idx) > 1:
            std = values.std()
            if std >= STD_FLOOR:
                centred = centred / (std + EPSILON)
        out[idx] = centred.clamp(*ASYM_CLIP) if method == "asym_clip" else centred
    return out


def group_advantages(
    rewards: torch.Tensor,
    group_ids: Sequence[Hashable],
    config: TrainingConfig,
    state_ids: Sequence[Hashable] | None = None,
) -> torch.Tensor:
    """One advantage per trajectory: ROLL normalisation, then verl's GRPO outcome advantage within each group.

    The reward sits on the last response token of a one-token "response" per trajectory, exactly how verl feeds
    outcome rewards (``token_level_rewards`` summed per row); ``index`` = the GRPO group ids.
    """
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    if config.reward_clip is not None:
        rewards = rewards.clamp(-config.reward_clip, config.reward_clip)
    normalised = normalize_rewards(rewards, group_ids, config.reward_norm_grouping, config.reward_norm_method,
                                   state_ids)
    mask = torch.ones(normalised.shape[0], 1)
    token_level_rewards = normalised.unsqueeze(-1) * mask
    advantages, _returns = compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards,
        response_mask=mask,
        index=np.array(list(group_ids), dtype=object),
        epsilon=EPSILON,
        norm_adv_by_std_in_grpo=config.norm_adv_by_std_in_grpo,
    )
    out = advantages[:, -1]
    if config.advantage_clip is not None:
        out = out.clamp(-config.advantage_clip, config.advantage_clip)
    return out


def batch_info(response_lengths: Sequence[int], config: TrainingConfig) -> dict[str, Any]:
    """verl ``agg_loss`` normalisers for a whole mini-batch, so its micro-batches add up to the full loss.

    ``response_lengths`` are the loss-masked token counts of every row of the mini-batch. ``loss_scale_factor``
    is pinned to ``max_response_length`` (verl would use the padded width, which changes from micro-batch to
    micro-batch) for ``seq-mean-token-sum-norm``.
    """
    return {
        "dp_size": 1,
        "batch_num_tokens": int(sum(response_lengths)),
        "global_batch_size": sum(1 for n in response_lengths if n > 0),
        "loss_scale_factor": config.max_response_length,
    }


def _actor_config(config: TrainingConfig, global_batch_info: dict[str, Any] | None):
    from verl.workers.config import ActorConfig

    return ActorConfig(
        strategy="fsdp",
        rollout_n=config.group_size,
        ppo_micro_batch_size_per_gpu=1,
        clip_ratio=config.clip_ratio_low,
        clip_ratio_low=config.clip_ratio_low,
        clip_ratio_high=config.clip_ratio_high,
        loss_agg_mode=config.loss_agg_mode,
        clip_ratio_c=config.effective_clip_ratio_c(),
        global_batch_info=dict(global_batch_info or {}),
    )


def policy_loss(
    old_logprobs: torch.Tensor,
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: TrainingConfig,
    global_batch_info: dict[str, Any] | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """verl's clipped policy loss (``get_policy_loss_fn('vanilla')``); all tensors are (rows, response tokens).

    ``advantages`` may be one value per row (broadcast over its tokens). Returns (loss, verl's actor metrics:
    ``actor/pg_clipfrac``, ``actor/ppo_kl``, ``actor/pg_clipfrac_lower``).
    """
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1).expand_as(logprobs)
    loss_fn = get_policy_loss_fn("vanilla")
    loss, metrics = loss_fn(
        old_log_prob=old_logprobs,
        log_prob=logprobs,
        advantages=advantages.to(logprobs.dtype),
        response_mask=response_mask.to(logprobs.dtype),
        loss_agg_mode=config.loss_agg_mode,
        config=_actor_config(config, global_batch_info),
    )
    return loss, metrics


def agg(
    loss_mat: torch.Tensor, response_mask: torch.Tensor, config: TrainingConfig,
    global_batch_info: dict[str, Any] | None = None,
) -> torch.Tensor:
    """verl ``agg_loss`` with the run's ``loss_agg_mode`` and the mini-batch normalisers."""
    from verl.trainer.ppo.core_algos import agg_loss

    return agg_loss(loss_mat=loss_mat, loss_mask=response_mask.to(loss_mat.dtype), loss_agg_mode=config.loss_agg_mode,
                    **(global_batch_info or {}))


def kl_term(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    config: TrainingConfig,
    global_batch_info: dict[str, Any] | None = None,
) -> torch.Tensor:
    """KL to the reference policy: verl ``kl_penalty`` with ``training.kl_loss_type``, aggregated like the loss."""
    from verl.trainer.ppo.core_algos import kl_penalty

    per_token = kl_penalty(logprob=logprobs, ref_logprob=ref_logprobs, kl_penalty=config.kl_loss_type)
    return agg(per_token, response_mask, config, global_batch_info)


def entropy_term(
    logits: torch.Tensor,
    response_mask: torch.Tensor,
    config: TrainingConfig,
    global_batch_info: dict[str, Any] | None = None,
) -> torch.Tensor:
    """Mean policy entropy over response tokens (verl ``entropy_from_logits``); logits are (rows, tokens, vocab)."""
    from verl.utils.torch_functional import entropy_from_logits

    return agg(entropy_from_logits(logits.float()), response_mask, config, global_batch_info)


def total_loss(
    pg_loss: torch.Tensor, config: TrainingConfig, entropy: torch.Tensor | None = None, kl: torch.Tensor | None = None
) -> torch.Tensor:
    """pg_loss - entropy_coef * entropy + kl_coef * kl, as verl's dp actor combines them."""
    loss = pg_loss
    if entropy is not None and config.entropy_coef > 0:
        loss = loss - config.entropy_coef * entropy
    if kl is not None and config.kl_coef > 0:
        loss = loss + config.kl_coef * kl
    return loss
