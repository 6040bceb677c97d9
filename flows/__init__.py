"""Prefect flows over the tasks in :mod:`tasks`: ``prepare-data``, ``train``, ``evaluate`` and ``pipeline`` (the
whole DAG). Each takes the run-config path and dotted ``key=value`` overrides as typed parameters, so the UI
renders a form and ``prefect deployment run --param`` validates input."""

#: The embedded default: bundled sample tasks, local sandbox, toy model, local GRPO on CPU.
DEFAULT_CONFIG = "configs/experiments/local_debug.yaml"
#: What `make demo` runs: the embedded default set up to show learning (SFT warm start -> GRPO -> before/after).
DEMO_CONFIG = "configs/experiments/local_learning.yaml"
