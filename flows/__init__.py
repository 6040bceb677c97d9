"""Prefect flows over the tasks in :mod:`tasks`: ``prepare-data``, ``train``, ``evaluate`` and ``pipeline`` (the
whole DAG). Each takes the run-config path and dotted ``key=value`` overrides as typed parameters, so the UI
renders a form and ``prefect deployment run --param`` validates input."""

#: The embedded default: bundled sample tasks, local sandbox, toy model, local GRPO on CPU.
DEFAULT_CONFIG = "configs/experiments/local_debug.yaml"
#: The embedded default set up to learn, what `make demo` runs: SFT warm start -> GRPO with the oracle -> eval ->
#: the base / SFT / GRPO table and the GRPO phase's reward curve.
LEARNING_CONFIG = "configs/experiments/local_learning.yaml"
