"""Users' own tasks: a JSON / JSONL / YAML file of TaskRecord-shaped dicts.

``source`` is forced to ``custom``; ``split`` defaults to ``test`` (``train`` for seed 001's RepoEnv rows, see
:mod:`graph_planner.data.sources.seed_rows`); a relative ``repo_path`` or local
``build.repo`` is resolved against the file's directory (prepare then copies the tree next to the output).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from graph_planner.data.io import is_remote_repo
from graph_planner.data.record import TaskRecord
from graph_planner.data.sources.base import RowRejected, build_record
from graph_planner.data.sources.hf_loader import DataSourceError
from graph_planner.data.sources.seed_rows import (
    is_seed_repoenv_row,
    misplaced_source_hint,
    normalize_seed_repoenv_row,
)

SOURCE = "custom"
DEFAULT_SPLIT = "test"


def load_custom_rows(path: str | Path) -> list[tuple[int, Any]]:
    """(row index, raw value) for every task in the file; unparsable JSONL lines come back as RowRejected."""
    path = Path(path)
    if not path.is_file():
        raise DataSourceError(f"custom task file not found: {path}")
    data_bytes = path.read_bytes()
    if path.suffix == ".jsonl":
        rows: list[tuple[int, Any]] = []
        for number, raw in enumerate(data_bytes.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                rows.append((number - 1, RowRejected(f"line {number}: not UTF-8 (byte {exc.start} of the line)")))
                continue
            try:
                rows.append((number - 1, json.loads(line)))
            except json.JSONDecodeError as exc:
                rows.append((number - 1, RowRejected(f"line {number}: not valid JSON ({exc.msg})")))
        return rows
    try:
        text = data_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data_bytes.count(b"\n", 0, exc.start) + 1
        raise DataSourceError(f"{path}: not UTF-8 (line {line}, byte {exc.start}); save the file as UTF-8") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise DataSourceError(f"{path}: not valid {path.suffix.lstrip('.').upper() or 'YAML'}: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):
        data = data["tasks"]
    if not isinstance(data, list):
        raise DataSourceError(f"{path}: expected a list of tasks (or {{'tasks': [...]}}), got {type(data).__name__}")
    return list(enumerate(data))


def normalize_custom_row(row: Any, base_dir: Path, max_steps: int) -> TaskRecord:
    """One custom task -> TaskRecord with absolute local paths (made relative again when copied)."""
    if isinstance(row, RowRejected):
        raise row
    if not isinstance(row, Mapping):
        raise RowRejected(f"expected an object with TaskRecord fields, got {type(row).__name__}")
    hint = misplaced_source_hint(row)
    if hint:
        raise RowRejected(hint, row.get("task_id") if isinstance(row.get("task_id"), str) else None)
    if is_seed_repoenv_row(row):  # seed 001's {task_id, max_steps, issue, sandbox: {...}}; a training file
        split = row.get("split") if isinstance(row.get("split"), str) else "train"
        return normalize_seed_repoenv_row(row, base_dir, split, max_steps)
    fields = dict(row)
    task_id = fields.get("task_id") if isinstance(fields.get("task_id"), str) else None
    fields["source"] = SOURCE
    fields.setdefault("split", DEFAULT_SPLIT)
    fields.setdefault("max_steps", max_steps)
    if isinstance(fields.get("repo_path"), str):
        fields["repo_path"] = str(_local_dir(fields["repo_path"], base_dir, "repo_path", task_id))
    build = fields.get("build")
    if isinstance(build, Mapping) and isinstance(build.get("repo"), str) and not is_remote_repo(build["repo"]):
        fields["build"] = {**build, "repo": str(_local_dir(build["repo"], base_dir, "build.repo", task_id))}
    return build_record(fields)


def _local_dir(value: str, base_dir: Path, field: str, task_id: str | None) -> Path:
    path = Path(value).expanduser()
    path = path if path.is_absolute() else (base_dir / path)
    if not path.is_dir():
        raise RowRejected(f"{field}: directory not found: {path}", task_id)
    return path.resolve()
