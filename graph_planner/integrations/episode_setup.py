"""From a registered dataset row to the task, run config and dataset dir of an episode; the env itself is built
by :func:`graph_planner.env.assembly.build_env`, as for every other runner.

A row (verl's ``extra_info``, or the row rLLM hands to ``BaseEnv.from_dict``) carries the full TaskRecord as JSON
under ``task`` (``graph_planner.data.registry`` writes it). The run config is the YAML file the job was started
with (``run_config_path``): the single source of env, sandbox, synthesiser and concurrency settings inside the
framework's worker processes. A task's relative ``repo_path`` is anchored at the row's ``dataset_dir`` when it has
one, else at ``<data.output_dir>/<task.source>``, the layout `gp data prepare` writes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from graph_planner.config.loader import load_run_config
from graph_planner.config.paths import run_paths
from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord


class RowError(ValueError):
    """A dataset row the adapters cannot use; the message names the key and what to do."""


def row_dict(row: Mapping[str, Any] | str) -> dict[str, Any]:
    """The row as a dict (rLLM may hand over the JSON text of the row)."""
    if isinstance(row, str):
        try:
            row = json.loads(row)
        except json.JSONDecodeError as exc:
            raise RowError(f"dataset row is a string but not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(row, Mapping):
        raise RowError(f"dataset row must be a mapping (the row's extra_info), got {type(row).__name__}")
    return dict(row)


def task_from_row(row: Mapping[str, Any] | str) -> TaskRecord:
    """The TaskRecord stored under ``row["task"]`` (JSON text or a dict)."""
    data = row_dict(row)
    raw = data.get("task")
    where = f"row {data.get('task_id') or data.get('index', '?')}"
    if raw is None:
        raise RowError(f"{where}: no 'task' key (keys: {sorted(data)}); register the data with `gp data register`, "
                       "which stores the full TaskRecord JSON under extra_info.task")
    try:
        if isinstance(raw, (str, bytes)):
            return TaskRecord.model_validate_json(raw)
        return TaskRecord.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "task"
        raise RowError(f"{where}: 'task' is not a valid TaskRecord ({field}: {first['msg']}); re-register the "
                       "dataset with this version of graph_planner") from None


def load_run_config_file(path: str | os.PathLike[str]) -> RunConfig:
    """The run config YAML, loaded like the job entrypoint loads it (``yaml_only``); parsed once per file version
    per process, a private copy per caller."""
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise FileNotFoundError(f"run config {resolved} not found: the agent loop / env reads the job's config YAML "
                                "(written by `gp train`); every node must see this path")
    return _load_cached(str(resolved), resolved.stat().st_mtime_ns).model_copy(deep=True)


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int) -> RunConfig:
    return load_run_config(path, yaml_only=True)


def dataset_dir_for(task: TaskRecord, config: RunConfig, row: Mapping[str, Any] | None = None) -> Path:
    """Where the task's relative ``repo_path`` is anchored (ignored by tasks with an absolute one)."""
    explicit = (row or {}).get("dataset_dir")
    if explicit:
        return Path(explicit)
    return run_paths(config).data_dir / task.source
