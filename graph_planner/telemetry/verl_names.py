"""Seed 000 section 5's W&B names in a verl job: ``train/kl``, ``train/entropy``, ``train/clipfrac``,
``train/policy_loss``, ``train/value_loss``, ``train/grad_norm`` next to verl's own ``actor/*`` / ``critic/*``.

verl logs from inside its Ray TaskRunner through ``verl.utils.tracking.Tracking``. The job's runtime env names this
module in ``VERL_USE_EXTERNAL_MODULES`` (:func:`graph_planner.training.ray.job.job_runtime_env`), so ``import verl``
imports it in every verl process, and it wraps ``Tracking.log`` once to add the seed names
(:func:`graph_planner.telemetry.metrics.with_seed_names`). Nothing else in verl changes.
"""

from __future__ import annotations

import logging
from typing import Any

from graph_planner.telemetry.metrics import with_seed_names

log = logging.getLogger(__name__)
MARK = "_graph_planner_seed_names"


def install() -> bool:
    """Wrap ``Tracking.log`` (idempotent); False when verl's tracking module cannot be imported."""
    try:
        from verl.utils import tracking
    except ImportError as exc:  # verl not installed, or an incompatible layout: keep verl's names only
        log.warning("seed metric names off: cannot import verl.utils.tracking (%s)", exc)
        return False
    original = tracking.Tracking.log
    if getattr(original, MARK, False):
        return True

    def log_with_seed_names(self: Any, data: dict[str, Any], step: int, backend: Any = None) -> Any:
        return original(self, with_seed_names(data), step, backend)

    setattr(log_with_seed_names, MARK, True)
    tracking.Tracking.log = log_with_seed_names
    return True


install()
