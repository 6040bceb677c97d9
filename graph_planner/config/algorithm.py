"""PPO / ROLL algorithm keys of the seeds (000 ``training.*``, 004 ROLL), with what each does on each backend.

The seeds name these keys; a user copying a ROLL or runbook YAML expects them to load. Each one either maps to a
verl override (``graph_planner.training.verl.config.algorithm_overrides``), changes the local GRPO backend
(``graph_planner.training.grpo`` / ``local_trainer``), or is refused with a message naming why. Values left at
``None`` mean "not set": verl's own default and our local behaviour stay as they were.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

log = logging.getLogger(__name__)

#: verl 0.9.1 ``AdvantageEstimator`` values (``verl.trainer.ppo.core_algos``); ROLL's ``reinforce`` is not one.
VERL_ADV_ESTIMATORS = (
    "gae", "grpo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo", "opo", "grpo_passk",
    "gpg", "rloo_vectorized", "grpo_vectorized", "optimal_token_baseline", "tir_optimal_token_baseline", "gdpo",
)
#: Estimators whose advantage compares the rollouts of one task (a group of one cannot learn).
GROUP_ESTIMATORS = frozenset({"grpo", "grpo_vectorized", "grpo_passk", "rloo", "rloo_vectorized", "opo", "gdpo"})
AdvEstimator = Literal[
    "gae", "grpo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo", "opo", "grpo_passk",
    "gpg", "rloo_vectorized", "grpo_vectorized", "optimal_token_baseline", "tir_optimal_token_baseline", "gdpo",
]
#: Dual clip off: verl always applies dual-clip at ``clip_ratio_c`` (must be > 1), so "off" is a bound never hit.
DUAL_CLIP_OFF = 1.0e9
#: ROLL grouping names that mean one of ours.
GROUPING_ALIASES = {"traj_group_id": "group", "inductive": "state"}


class AlgorithmKeys(BaseModel):
    """Seed 000 / ROLL 004 PPO keys; ``TrainingConfig`` inherits them (``training.<key>`` in YAML)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    adv_estimator: AdvEstimator = Field(
        "grpo", description="verl algorithm.adv_estimator (verl's choices; the local backend runs grpo only).")
    ppo_epochs: int = Field(1, ge=1, description="Passes over each step's rollouts (verl actor.ppo_epochs).")
    gamma: float | None = Field(None, ge=0, le=1, description="Discount (verl algorithm.gamma; no effect on "
                                                             "GRPO's single outcome reward).")
    lambd: float | None = Field(None, ge=0, le=1, description="ROLL GAE lambda (verl algorithm.lam; gae only).")
    clip_coef: float | None = Field(None, gt=0, description="Seed 000 PPO clip epsilon: sets clip_ratio_low and "
                                                           "clip_ratio_high unless those are given.")
    dual_clip_loss: bool = Field(True, description="ROLL dual-clip for negative advantages (verl clip_ratio_c).")
    clip_ratio_c: float = Field(3.0, gt=1, description="Dual-clip bound c (verl actor.clip_ratio_c).")
    value_coef: float | None = Field(None, ge=0, description="Seed 000 value-loss weight: accepted, no effect (GRPO "
                                                            "has no value head; verl's critic has its own optimiser).")
    whiten_advantages: bool | None = Field(None, description="ROLL: whiten advantages; under GRPO = divide by the "
                                                             "group std (norm_adv_by_std_in_grpo).")
    whiten_rewards: bool | None = Field(None, description="ROLL: whiten rewards before advantages (local backend: "
                                                          "batch mean_std reward normalisation).")
    reward_clip: float | None = Field(None, gt=0, description="ROLL: clip episode rewards to [-c, c] (both backends).")
    advantage_clip: float | None = Field(None, gt=0, description="ROLL: clip advantages to [-c, c] (local backend).")
    init_kl_coef: float | None = Field(None, ge=0, description="ROLL in-reward KL start coefficient (verl "
                                                               "algorithm.kl_ctrl.kl_coef + use_kl_in_reward).")
    kl_horizon: int | None = Field(None, ge=1, description="ROLL adaptive KL horizon (verl algorithm.kl_ctrl.horizon).")
    target_kl: float | None = Field(None, gt=0, description="Target KL of the adaptive in-reward KL controller "
                                                           "(verl algorithm.kl_ctrl.target_kl, type adaptive).")
    kl_penalty: Literal["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"] | None = Field(
        None, description="ROLL/verl KL estimator (verl algorithm.kl_penalty; also the KL-loss type unless "
                          "kl_loss_type is given). 'full' is refused: verl 0.9.1 does not implement it.")
    critic_warmup: int = Field(0, ge=0, description="ROLL/verl steps before actor updates start (trainer."
                                                    "critic_warmup; verl backend).")
    sft_loss_coef: float = Field(0.0, ge=0, description="ROLL SFT loss weight: only 0 (verl's PPO actor has no SFT "
                                                        "term).")

    @model_validator(mode="before")
    @classmethod
    def _roll_spellings(cls, data: Any) -> Any:
        """ROLL's nested ``reward_normalization: {grouping, method}`` and grouping names map onto ours."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        nested = data.pop("reward_normalization", None)
        if nested is not None:
            if not isinstance(nested, dict) or set(nested) - {"grouping", "method"}:
                raise ValueError(f"reward_normalization must be a mapping with grouping / method, got {nested!r}")
            for roll, ours in (("grouping", "reward_norm_grouping"), ("method", "reward_norm_method")):
                if roll in nested:
                    if ours in data and data[ours] != nested[roll]:
                        raise ValueError(f"reward_normalization.{roll} ({nested[roll]!r}) contradicts {ours} "
                                         f"({data[ours]!r}); give one of them")
                    data[ours] = nested[roll]
        grouping = data.get("reward_norm_grouping")
        if isinstance(grouping, str) and grouping in GROUPING_ALIASES:
            data["reward_norm_grouping"] = GROUPING_ALIASES[grouping]
        # The seed keys fill in our own keys unless those are given (explicit keys win; both land in the
        # resolved config, so a reload gives the same values).
        if data.get("clip_coef") is not None:
            data.setdefault("clip_ratio_low", data["clip_coef"])
            data.setdefault("clip_ratio_high", data["clip_coef"])
        if data.get("whiten_advantages") is not None:
            data.setdefault("norm_adv_by_std_in_grpo", data["whiten_advantages"])
        if data.get("whiten_rewards"):
            data.setdefault("reward_norm_grouping", "batch")
            data.setdefault("reward_norm_method", "mean_std")
        if data.get("kl_penalty") not in (None, "full"):
            data.setdefault("kl_loss_type", data["kl_penalty"])
        if data.get("target_kl") is not None and data.get("init_kl_coef") is None and data.get("kl_coef"):
            # seed 000 lists kl_coef beside target_kl: PPO's adaptive KL starts from kl_coef. It becomes the
            # controller's start value (verl algorithm.kl_ctrl.kl_coef), not also the KL-loss weight: verl would
            # then penalise the same divergence twice, once in the reward and once in the loss.
            data["init_kl_coef"] = data["kl_coef"]
            data["kl_coef"] = 0.0
        return data

    @model_validator(mode="after")
    def _refusals(self) -> AlgorithmKeys:
        if self.kl_penalty == "full":
            raise ValueError("training.kl_penalty='full' (ROLL's KL over the whole vocabulary) is not available: "
                             "verl 0.9.1's kl_penalty('full') raises NotImplementedError; use kl, abs, mse or "
                             "low_var_kl")
        if self.sft_loss_coef > 0:
            raise ValueError(f"training.sft_loss_coef ({self.sft_loss_coef}): verl 0.9.1's PPO actor loss has no "
                             "SFT term, so the weight would be silently ignored; set it to 0")
        if self.target_kl is not None and self.init_kl_coef is None:
            raise ValueError("training.target_kl needs a start coefficient, training.kl_coef (> 0) or "
                             "training.init_kl_coef: it is the target of verl's adaptive in-reward KL controller, "
                             "which starts from that coefficient")
        if self.kl_horizon is not None and self.init_kl_coef is None:
            raise ValueError("training.kl_horizon needs training.init_kl_coef (in-reward KL controller)")
        return self

    def effective_clip_ratio_c(self) -> float:
        return self.clip_ratio_c if self.dual_clip_loss else DUAL_CLIP_OFF


def backend_problems(training: Any) -> list[str]:
    """Keys that cannot work on the selected ``training.backend`` (the loader turns these into errors)."""
    problems: list[str] = []
    if training.backend == "local":
        if training.adv_estimator != "grpo":
            problems.append(f"training.adv_estimator={training.adv_estimator!r} needs training.backend=verl "
                            "(the local backend computes GRPO advantages only)")
        if training.target_kl is not None:
            problems.append("training.target_kl: the adaptive in-reward KL controller is verl's (algorithm.kl_ctrl); "
                            "the local backend has only the fixed KL-loss weight training.kl_coef (drop target_kl)")
        elif training.init_kl_coef is not None:
            problems.append("training.init_kl_coef: the in-reward KL controller is verl's (algorithm.kl_ctrl); "
                            "the local backend's KL is the loss term training.kl_coef")
        if training.critic_warmup > 0:
            problems.append("training.critic_warmup: the local backend trains no critic; use training.backend=verl")
    elif training.advantage_clip is not None:
        problems.append("training.advantage_clip: verl 0.9.1 has no advantage clip; it applies to "
                        "training.backend=local only")
    return problems


def backend_notes(training: Any) -> list[str]:
    """Keys that load but do nothing on this backend (logged once at load time, documented)."""
    notes: list[str] = []
    if training.value_coef is not None:
        notes.append("training.value_coef has no effect: GRPO has no value head, and verl's critic (gae) is a "
                     "separate model with its own optimiser")
    if training.adv_estimator != "gae" and training.lambd is not None:
        notes.append("training.lambd is the GAE lambda; it has no effect with adv_estimator=" + training.adv_estimator)
    if training.backend == "verl" and training.whiten_rewards:
        notes.append("training.whiten_rewards applies to the local backend; verl's GRPO normalises within each group")
    return notes
