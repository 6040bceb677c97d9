"""What every source adapter shares: the rejection type and turning validation errors into column-named reasons."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import ValidationError

from graph_planner.data.record import TaskRecord


class RowRejected(ValueError):
    """A source row cannot become a TaskRecord; ``reason`` names the column (or field) at fault."""

    def __init__(self, reason: str, task_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.task_id = task_id


@dataclass(frozen=True)
class RejectedRow:
    """One line of ``rejected.jsonl``: nothing is dropped silently."""

    source: str
    split: str
    row_index: int
    task_id: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def validation_reason(exc: ValidationError, columns: Mapping[str, str] | None = None) -> str:
    """``FAIL_TO_PASS: not a JSON list of test ids`` from a TaskRecord ValidationError.

    ``columns`` maps TaskRecord field names back to the source's column names, so the reason points at the
    data the user can inspect.
    """
    columns = columns or {}
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        field = columns.get(loc[0], loc[0]) if loc else "<row>"
        where = field + "".join(f"[{p}]" for p in loc[1:])
        message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def build_record(fields: Mapping[str, Any], columns: Mapping[str, str] | None = None) -> TaskRecord:
    """Validate a normalised dict into a TaskRecord, or raise RowRejected with column-named reasons."""
    try:
        return TaskRecord.model_validate(dict(fields))
    except ValidationError as exc:
        raise RowRejected(validation_reason(exc, columns), task_id=_str_or_none(fields.get("task_id"))) from None


def require_text(row: Mapping[str, Any], column: str, task_id: str | None = None) -> str:
    """A non-empty string column; the reason says whether it is missing, null, empty or of the wrong type."""
    if column not in row:
        raise RowRejected(f"missing column {column}", task_id)
    value = row[column]
    if value is None:
        raise RowRejected(f"{column}: null", task_id)
    if not isinstance(value, str):
        raise RowRejected(f"{column}: expected a string, got {type(value).__name__}", task_id)
    if not value.strip():
        raise RowRejected(f"{column}: empty", task_id)
    return value


def optional_text(row: Mapping[str, Any], column: str) -> str | None:
    value = row.get(column)
    if isinstance(value, str) and value.strip():
        return value
    return None


def repo_short_name(repo: str) -> str:
    """``django/django`` -> ``django``; R2E short names stay as they are."""
    return repo.rstrip("/").rsplit("/", 1)[-1]


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
