"""train: prepare the data (cached after the first run) -> preflight -> [trajectory SFT warm start when
training.sft.enabled] -> GRPO training (local, or a Ray job)."""

from __future__ import annotations

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows import DEFAULT_CONFIG
from flows.prepare_data import prepare
from tasks.config import load_resolved, resolve_config
from tasks.learning import sft_warm_start
from tasks.preflight import preflight
from tasks.training import run_training


@flow(name="train", task_runner=ThreadPoolTaskRunner(max_workers=8))
def train(config_path: str = DEFAULT_CONFIG, overrides: list[str] = []) -> str:  # noqa: B006 - never mutated
    """Train the planner with GRPO; returns the checkpoint dir.

    Args:
        config_path: Run config YAML, relative to the project root (configs/experiments/*.yaml).
        overrides: Dotted config overrides applied on top of the YAML, e.g. training.total_steps=1 or
            training.backend=verl; an unknown key fails the run with the closest real keys in its message.
    """
    config_file = resolve_config(config_path, overrides)
    registry = prepare(config_file)
    checked = preflight(config_file)
    warm_start = sft_warm_start(checked, registry) if load_resolved(checked).training.sft.enabled else ""
    return run_training(checked, registry, warm_start)
