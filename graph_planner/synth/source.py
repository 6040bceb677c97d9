"""The ``synth`` source of ``gp data prepare`` and the Prefect data step: ``data.synth_repos`` through
:func:`graph_planner.synth.synth.synthesize` (registered with ``data.prepare.register_source`` when
graph_planner.synth is imported)."""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
from pathlib import Path

from graph_planner.config.schema import DataConfig
from graph_planner.data.prepare import PrepareError, ProgressCallback, register_source
from graph_planner.data.record import TaskRecord
from graph_planner.data.sources.base import RejectedRow
from graph_planner.synth.synth import SOURCE, SynthOptions, synthesize
from graph_planner.synth.validate import SynthInputError

log = logging.getLogger(__name__)


def build_synth_source(data: DataConfig, progress: ProgressCallback | None
                       ) -> tuple[list[TaskRecord], list[RejectedRow]] | None:
    if not data.synth_repos:
        return None
    options = SynthOptions(seed=data.synth_seed, per_target=data.synth_per_target, max_tasks=data.synth_max_tasks,
                           max_steps=data.max_steps, val_frac=data.synth_val_frac, test_frac=data.synth_test_frac)
    try:
        bundled = _bundled(data, options)
        if bundled is not None:
            return bundled
        records, rejected, _stats, staging = synthesize(data.synth_repos, options, progress)
    except SynthInputError as exc:
        raise PrepareError(f"data.synth_repos: {exc}") from None
    atexit.register(shutil.rmtree, staging, True)  # prepare copies the task repositories out of it
    return records, rejected


def _bundled(data: DataConfig, options: SynthOptions) -> tuple[list[TaskRecord], list[RejectedRow]] | None:
    """The committed tasks of datasets/sample/synth when the run asks for exactly what they were made from (same
    source trees, seed, per-target count and cap), with their task repositories rebuilt; else None."""
    from graph_planner.synth.bundled import BUNDLED_DIR, bundle_key, load_bundle, matches

    if not (BUNDLED_DIR / "manifest.json").is_file():
        return None
    key = bundle_key(list(data.synth_repos), options.seed, options.per_target, options.max_tasks)
    if not matches(BUNDLED_DIR, key):
        return None
    staging = Path(tempfile.mkdtemp(prefix="gp-synth-bundled-"))
    atexit.register(shutil.rmtree, staging, True)
    sources = {Path(r).resolve().name: Path(r).resolve() for r in data.synth_repos}
    log.info("synth source: the committed tasks of %s (made from the same trees and options)", BUNDLED_DIR)
    return load_bundle(BUNDLED_DIR, sources, staging, options.seed, options.val_frac, options.test_frac,
                       options.max_steps)


def register() -> None:
    register_source(SOURCE, build_synth_source)
