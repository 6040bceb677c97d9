"""The ``synth`` source of ``gp data prepare`` and the Prefect data step: ``data.synth_repos`` through
:func:`graph_planner.synth.synth.synthesize` (registered with ``data.prepare.register_source`` when
graph_planner.synth is imported)."""

from __future__ import annotations

import atexit
import shutil

from graph_planner.config.schema import DataConfig
from graph_planner.data.prepare import PrepareError, ProgressCallback, register_source
from graph_planner.data.record import TaskRecord
from graph_planner.data.sources.base import RejectedRow
from graph_planner.synth.synth import SOURCE, SynthOptions, synthesize
from graph_planner.synth.validate import SynthInputError


def build_synth_source(data: DataConfig, progress: ProgressCallback | None
                       ) -> tuple[list[TaskRecord], list[RejectedRow]] | None:
    if not data.synth_repos:
        return None
    options = SynthOptions(seed=data.synth_seed, per_target=data.synth_per_target, max_tasks=data.synth_max_tasks,
                           max_steps=data.max_steps)
    try:
        records, rejected, _stats, staging = synthesize(data.synth_repos, options, progress)
    except SynthInputError as exc:
        raise PrepareError(f"data.synth_repos: {exc}") from None
    atexit.register(shutil.rmtree, staging, True)  # prepare copies the task repositories out of it
    return records, rejected


def register() -> None:
    register_source(SOURCE, build_synth_source)
