"""Compatibility fixes for verl 0.9.1 in the project's environment, loaded in every verl process of the job.

The job's runtime env lists this module in ``VERL_USE_EXTERNAL_MODULES`` on every cluster (GPU or CPU), so
``import verl`` imports it first thing; each fix is a no-op where it does not apply.

- **trl >= 1.0** (the train extra's SFT warm start uses it): verl's ``apply_monkey_patch`` imports
  ``AutoModelForCausalLMWithValueHead`` from trl in every FSDP worker as soon as trl is importable, only to patch
  its ``state_dict`` for trl value-head models, which the project never builds; trl 1.x removed that class, so the
  import fails and no worker starts. Where the class is missing, verl's monkey patch is told that trl is absent.
"""

from __future__ import annotations

import importlib
import importlib.util


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


def install() -> list[str]:
    """Apply the fixes that apply here; returns their names."""
    applied = []
    if trl_lacks_value_head():
        from verl.models.transformers import monkey_patch

        monkey_patch.is_trl_available = lambda: False  # the name apply_monkey_patch calls
        applied.append("trl-value-head")
    return applied


APPLIED = install()
