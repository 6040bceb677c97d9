"""train: prepare the data (cached after the first run) -> preflight -> GRPO training (local, or a Ray job)."""

from __future__ import annotations

from prefect import flow, unmapped
from prefect.task_runners import ThreadPoolTaskRunner

from flows import DEFAULT_CONFIG
from tasks.config import resolve_config
from tasks.data import build_manifest, download_and_normalise, register_dataset
from tasks.images import prepull_image, select_images
from tasks.preflight import preflight
from tasks.training import run_training


@flow(name="train", task_runner=ThreadPoolTaskRunner(max_workers=8))
def train(config_path: str = DEFAULT_CONFIG, overrides: list[str] = []) -> str:  # noqa: B006 - never mutated
    """Train the planner with GRPO; returns the checkpoint dir."""
    config_file = resolve_config(config_path, overrides)
    dataset_dir = download_and_normalise(config_file)
    manifest = build_manifest(config_file, dataset_dir)
    prepull_image.map(select_images(config_file, manifest), config_file=unmapped(config_file)).result()
    registry = register_dataset(config_file, dataset_dir)
    return run_training(preflight(config_file), registry)
