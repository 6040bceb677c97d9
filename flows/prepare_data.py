"""prepare-data: download + normalise -> docker manifest -> parallel prepull -> dataset registration.

:func:`prepare` is those four steps as one call; the train and pipeline flows run it too, so the data half of the
DAG is written once.
"""

from __future__ import annotations

from prefect import flow, unmapped
from prefect.task_runners import ThreadPoolTaskRunner

from flows import DEFAULT_CONFIG
from tasks.config import resolve_config
from tasks.data import build_manifest, download_and_normalise, register_splits
from tasks.images import prepull_image, select_images


def prepare(config_file: str) -> str:
    """download + normalise -> manifest -> prepull -> register, inside the calling flow; returns the registry dir
    (verl parquet per split). Every step is cached, so a flow re-running it costs cache lookups only."""
    dataset_dir = download_and_normalise(config_file)
    manifest = build_manifest(config_file, dataset_dir)
    prepull_image.map(select_images(config_file, manifest), config_file=unmapped(config_file)).result()
    return register_splits(config_file, dataset_dir)


@flow(name="prepare-data", task_runner=ThreadPoolTaskRunner(max_workers=8))
def prepare_data(config_path: str = DEFAULT_CONFIG, overrides: list[str] = []) -> str:  # noqa: B006 - never mutated
    """Prepare the configured datasets; returns the registry dir (verl parquet per split).

    Args:
        config_path: Run config YAML, relative to the project root (configs/experiments/*.yaml).
        overrides: Dotted config overrides applied on top of the YAML, e.g. data.swebench_limit=20.
    """
    return prepare(resolve_config(config_path, overrides))
