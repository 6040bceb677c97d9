"""Load and build HF causal LMs one at a time per process.

transformers' ``from_pretrained`` turns weight init and weight tying off process-wide while it builds the model
(it swaps ``PreTrainedModel.init_weights`` / ``tie_weights`` and torch's ``nn.init`` functions for no-ops and
restores what it found). Two threads loading at once interleave those swaps, and the no-ops can stay installed for
the rest of the process: every later model then gets an untied, uninitialised LM head. Rollouts, evals and Prefect
tasks run in threads, so every load and toy build in this package goes through :data:`MODEL_LOCK`.
"""

from __future__ import annotations

import threading
from typing import Any

MODEL_LOCK = threading.RLock()


def load_causal_lm(path: str, **kwargs: Any):  # -> PreTrainedModel (transformers imported lazily)
    """``AutoModelForCausalLM.from_pretrained(path, **kwargs)`` under :data:`MODEL_LOCK`."""
    from graph_planner.imports import import_lock

    with import_lock():
        from transformers import AutoModelForCausalLM
    with MODEL_LOCK:
        return AutoModelForCausalLM.from_pretrained(path, **kwargs)
