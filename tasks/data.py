"""Data steps: download + normalise (I/O, retried), docker manifest and dataset registration (deterministic,
cached on content, never retried). Logic lives in :mod:`graph_planner.data`; these are orchestration wrappers."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import get_run_logger, task

from graph_planner.config.paths import REGISTRY
from graph_planner.data.manifest import resolve_manifest
from graph_planner.data.prepare import prepare_datasets, register_prepared
from graph_planner.synth import register as _register_synth_source
from tasks.artifacts import ProgressArtifact, run_scope
from tasks.caching import InputFileContents, step_cache
from tasks.config import load_resolved
from tasks.retry import IO_RETRIES, IO_RETRY_DELAYS, IO_RETRY_JITTER, transient_only

_register_synth_source()  # data.synth_repos: the synth source (idempotent; importing graph_planner.synth did it)

#: Sub-dir of the prepared data dir where registration writes verl parquet (same place as `gp data register`).
REGISTRY_DIR = REGISTRY
#: Steps reading the prepared dir: key on its content, but not on the registry that a later step writes inside.
PREPARED_CONTENT = InputFileContents(exclude=("config_file",), ignore_dirs=(REGISTRY_DIR,))


@task(name="download-and-normalise", persist_result=True, retries=IO_RETRIES, retry_delay_seconds=IO_RETRY_DELAYS,
      retry_jitter_factor=IO_RETRY_JITTER, retry_condition_fn=transient_only,
      cache_policy=step_cache("data", ("graph_planner.data",), inputs=False))
def download_and_normalise(config_file: str) -> str:
    """Load every configured source (HF hub or local files), write TaskRecord JSONL + instances + manifests;
    return the prepared dir. A changed source file or ``data.*`` value re-runs it; transient errors retry."""
    config = load_resolved(config_file)
    bar = ProgressArtifact(f"{run_scope(config.run_name)}-prepare-data-progress",
                           "rows normalised (current source/split)")
    summary = prepare_datasets(config.data, progress=lambda stage, done, total: bar.update(done, total, stage))
    counts = {f"{s.source}/{split}": f"{c.kept} kept, {c.rejected} rejected"
              for s in summary.sources.values() for split, c in s.splits.items()}
    get_run_logger().info("prepared %s: %s", summary.out_dir, json.dumps(counts))
    if summary.nothing_kept:
        raise ValueError(f"no task was kept ({summary.total_rejected} rejected); see the rejected.jsonl files "
                         f"under {summary.out_dir}")
    return summary.out_dir


@task(name="build-manifest", persist_result=True,
      cache_policy=step_cache("manifest", ("graph_planner.data.manifest",), PREPARED_CONTENT))
def build_manifest(config_file: str, dataset_dir: str) -> str:
    """The docker image manifest: ``images.manifest`` if set, else the prepared dir's (written if absent)."""
    config = load_resolved(config_file)
    return str(resolve_manifest(config.images.manifest, dataset_dir))


@task(name="register-dataset", persist_result=True,
      cache_policy=step_cache("register", ("graph_planner.data.registry",), PREPARED_CONTENT))
def register_splits(config_file: str, dataset_dir: str) -> str:
    """Register every prepared split as verl parquet under ``<dataset dir>/registry``; return that dir."""
    config = load_resolved(config_file)
    logger = get_run_logger()
    for result in register_prepared(dataset_dir, config.data.dataset_name):
        logger.info("%s %s/%s: %d rows -> %s", "registered" if result.changed else "unchanged", result.name,
                    result.split, result.rows, result.path)
    return str(Path(dataset_dir) / REGISTRY_DIR)
