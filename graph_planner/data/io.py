"""Reading and writing TaskRecord JSONL files (one record per line), with atomic writes.

Every file the data pipeline writes goes through :func:`atomic_write_bytes`, so a crash never leaves a
half-written JSONL that a later stage (training, eval, caching by content hash) would trust.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from graph_planner.data.record import TaskRecord
from graph_planner.disk import atomic_write_bytes, atomic_write_text

#: File names inside a prepared source dir that are not TaskRecord JSONL splits.
NON_SPLIT_FILES = frozenset({"rejected.jsonl"})


class TaskFileError(ValueError):
    """A TaskRecord file is missing or a line is not a valid TaskRecord; the message names file and line."""


def write_json(path: str | Path, payload: Any) -> Path:
    """Pretty, key-sorted JSON (stable bytes for content hashing)."""
    return atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> Path:
    lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows]
    return atomic_write_text(path, "".join(lines))


def task_records_jsonl(records: Iterable[TaskRecord]) -> bytes:
    """The exact bytes of a TaskRecord JSONL file (field order fixed by the model, so output is stable)."""
    return b"".join(record.model_dump_json().encode("utf-8") + b"\n" for record in records)


def write_task_records(path: str | Path, records: Iterable[TaskRecord]) -> Path:
    """Write records as JSONL, atomically."""
    return atomic_write_bytes(path, task_records_jsonl(records))


def resolve_split_file(path: str | Path, split: str | None = None) -> Path:
    """A JSONL file, or ``<dir>/<split>.jsonl`` when ``path`` is a prepared dir."""
    path = Path(path)
    if path.is_dir():
        if split is None:
            splits = sorted(p.stem for p in path.glob("*.jsonl") if p.name not in NON_SPLIT_FILES)
            raise TaskFileError(f"{path} is a directory: name a split (one of {splits or 'none found'})")
        path = path / f"{split}.jsonl"
    if not path.is_file():
        raise TaskFileError(f"task file not found: {path} (run `gp data prepare` or check paths.dataset_*)")
    return path


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, object) for each non-blank line; errors name the file and line."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskFileError(f"{path} line {number}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise TaskFileError(f"{path} line {number}: expected a JSON object, got {type(obj).__name__}")
            yield number, obj


def read_task_records(
    path: str | Path, split: str | None = None, resolve_paths: bool = False
) -> list[TaskRecord]:
    """Load TaskRecords from a JSONL file (or ``<dir>/<split>.jsonl``).

    ``repo_path`` and a local ``build.repo`` are stored relative to the file's directory; with
    ``resolve_paths`` they come back absolute (do not write such records back: outputs must stay movable).
    """
    file = resolve_split_file(path, split)
    records: list[TaskRecord] = []
    for number, obj in iter_jsonl(file):
        try:
            record = TaskRecord.model_validate(obj)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "<row>"
            raise TaskFileError(
                f"{file} line {number}: not a TaskRecord: {where}: {first['msg']} "
                f"({exc.error_count()} error(s); re-run `gp data prepare`)"
            ) from None
        if resolve_paths:
            record = _with_absolute_paths(record, file.parent)
        records.append(record)
    return records


def _with_absolute_paths(record: TaskRecord, base: Path) -> TaskRecord:
    update: dict[str, Any] = {}
    if record.repo_path is not None:
        update["repo_path"] = str(record.resolve_repo_path(base))
    if record.build is not None and not is_remote_repo(record.build.repo):
        repo = Path(record.build.repo)
        update["build"] = record.build.model_copy(
            update={"repo": str(repo if repo.is_absolute() else (base / repo).resolve())}
        )
    return record.model_copy(update=update) if update else record


def is_remote_repo(repo: str) -> bool:
    """Git URLs (https://, ssh://, git@host:) as opposed to local paths."""
    return "://" in repo or repo.startswith("git@")
