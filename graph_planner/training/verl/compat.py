"""Compatibility fixes for verl 0.9.1 in the project's environment, loaded in every verl process of the job.

The job's runtime env lists this module in ``VERL_USE_EXTERNAL_MODULES`` on every cluster (GPU or CPU), so
``import verl`` imports it first thing; each fix is a no-op where it does not apply.

- **trl >= 1.0** (the train extra's SFT warm start uses it): verl's ``apply_monkey_patch`` imports
  ``AutoModelForCausalLMWithValueHead`` from trl in every FSDP worker as soon as trl is importable, only to patch
  its ``state_dict`` for trl value-head models, which the project never builds; trl 1.x removed that class, so the
  import fails and no worker starts. Where the class is missing, verl's monkey patch is told that trl is absent.
- **log noise**: verl resolves the Continuous Token builder for every agent loop, i.e. every episode, and for a
  model type it has no builder for (the toy Llama, most checkpoints) warns each time that it falls back to the
  default one. A filter on that logger passes this warning once per process; its other messages are untouched.
- **``advantage/abs_mean``**: verl logs its advantages only as ``critic/advantages/{mean,max,min}``; the local
  engine's ``advantage/abs_mean`` (mean |advantage| over the step's trajectories, the number that says whether
  GRPO had a signal) is added to verl's own data metrics, from the advantages verl trained on, so both engines
  log it with one definition.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import sys
import threading
from typing import Any

#: verl's Continuous Token wiring logger, and the start of its per-episode fallback warning's template.
CONTINUOUS_TOKEN_LOGGER = "verl.utils.tokenizer.continuous_token_wiring"
BUILDER_FALLBACK = "No model-specific Continuous Token builder is registered"


class OncePerProcess(logging.Filter):
    """Passes the first record whose message template starts with ``prefix`` and drops its repeats; every other
    record passes. Matches the unformatted template, so the repeats' arguments do not matter."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix
        self._seen = False
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(self.prefix)):
            return True
        with self._lock:
            first, self._seen = not self._seen, True
        return first


def quiet_builder_fallback() -> bool:
    """Install the once-per-process filter of verl's builder fallback warning; False when already installed."""
    logger = logging.getLogger(CONTINUOUS_TOKEN_LOGGER)
    if any(isinstance(f, OncePerProcess) and f.prefix == BUILDER_FALLBACK for f in logger.filters):
        return False
    logger.addFilter(OncePerProcess(BUILDER_FALLBACK))
    return True


def trl_lacks_value_head() -> bool:
    """True when trl is installed but has no ``AutoModelForCausalLMWithValueHead`` (trl >= 1.0)."""
    if importlib.util.find_spec("trl") is None:
        return False
    for module in ("trl.experimental.ppo", "trl"):
        try:
            if hasattr(importlib.import_module(module), "AutoModelForCausalLMWithValueHead"):
                return False
        except ImportError:
            continue
    return True


ADVANTAGE_ABS_MEAN = "advantage/abs_mean"


def advantage_abs_mean(batch: Any) -> float:
    """Mean |advantage| over the batch's trajectories (one row each): a row's advantage is the mean over its
    response tokens (GRPO gives them all the same value), as the local engine has one advantage per trajectory."""
    advantages = batch.batch["advantages"]
    mask = batch.batch["response_mask"].to(advantages.dtype)
    per_row = (advantages * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    return float(per_row.abs().mean().item())


def add_advantage_abs_mean() -> bool:
    """Wrap verl's ``compute_data_metrics`` (where its trainer binds it too) to add ``advantage/abs_mean``;
    False when already wrapped."""
    from verl.trainer.ppo import metric_utils

    original = metric_utils.compute_data_metrics
    if getattr(original, "adds_advantage_abs_mean", False):
        return False

    @functools.wraps(original)
    def compute_data_metrics(batch: Any, use_critic: bool = True) -> dict[str, Any]:
        metrics = original(batch=batch, use_critic=use_critic)
        metrics[ADVANTAGE_ABS_MEAN] = advantage_abs_mean(batch)
        return metrics

    compute_data_metrics.adds_advantage_abs_mean = True  # type: ignore[attr-defined]
    metric_utils.compute_data_metrics = compute_data_metrics
    trainer = sys.modules.get("verl.trainer.ppo.ray_trainer")  # imported before this ran: rebind its name too
    if trainer is not None and getattr(trainer, "compute_data_metrics", None) is original:
        trainer.compute_data_metrics = compute_data_metrics
    return True


def install() -> list[str]:
    """Apply the fixes that apply here; returns their names."""
    applied = []
    if trl_lacks_value_head():
        from verl.models.transformers import monkey_patch

        monkey_patch.is_trl_available = lambda: False  # the name apply_monkey_patch calls
        applied.append("trl-value-head")
    if quiet_builder_fallback():
        applied.append("builder-fallback-once")
    if add_advantage_abs_mean():
        applied.append("advantage-abs-mean")
    return applied


APPLIED = install()
