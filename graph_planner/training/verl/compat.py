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
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import threading

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


def install() -> list[str]:
    """Apply the fixes that apply here; returns their names."""
    applied = []
    if trl_lacks_value_head():
        from verl.models.transformers import monkey_patch

        monkey_patch.is_trl_available = lambda: False  # the name apply_monkey_patch calls
        applied.append("trl-value-head")
    if quiet_builder_fallback():
        applied.append("builder-fallback-once")
    return applied


APPLIED = install()
