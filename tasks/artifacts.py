"""Prefect artifacts the UI shows on a run page: progress bars during long steps, links to files, tables.

Keys may hold only lowercase letters, digits and dashes; a keyed artifact also appears on the global Artifacts
page with its version history.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect.artifacts import (
    create_link_artifact,
    create_progress_artifact,
    update_progress_artifact,
)


class ProgressArtifact:
    """A progress bar (0-100 %) for a long step, updated at most every ``min_interval_s`` (and always at 100 %)."""

    def __init__(self, key: str, description: str, min_interval_s: float = 1.0) -> None:
        self.key = key
        self.description = description
        self.min_interval_s = min_interval_s
        self._id: UUID | None = None
        self._last = 0.0

    def update(self, done: float, total: float, description: str | None = None) -> None:
        percent = 100.0 if total <= 0 else max(0.0, min(100.0, 100.0 * done / total))
        now = time.monotonic()
        if self._id is None:
            # _sync: also safe when called from a coroutine (e.g. a log sink inside asyncio.run)
            created = create_progress_artifact(progress=percent, key=self.key, description=self.description,
                                               _sync=True)  # type: ignore[call-arg]
            self._id = created if isinstance(created, UUID) else UUID(str(created))
            self._last = now
            return
        if percent < 100.0 and now - self._last < self.min_interval_s:
            return
        self._last = now
        update_progress_artifact(artifact_id=self._id, progress=percent, description=description,
                                 _sync=True)  # type: ignore[call-arg]


def link_files(paths: dict[str, str | Path], key_prefix: str) -> None:
    """One link artifact per existing file (``file://`` URL of the absolute path), keyed ``<prefix>-<name>``."""
    for name, path in paths.items():
        resolved = Path(path).resolve()
        if resolved.exists():
            create_link_artifact(link=resolved.as_uri(), link_text=str(path), key=artifact_key(f"{key_prefix}-{name}"),
                                 description=f"{name}: {resolved}")


def artifact_key(text: str) -> str:
    """A valid artifact key from free text (lowercase, digits and dashes)."""
    cleaned = "".join(ch if ch.isalnum() else "-" for ch in text.lower())
    return "-".join(part for part in cleaned.split("-") if part) or "artifact"


def table_rows(rows: list[dict[str, Any]], columns: list[str]) -> list[dict[str, Any]]:
    """Rows cut to ``columns`` with plain JSON values (the table artifact renders str/number/bool)."""
    out = []
    for row in rows:
        out.append({c: (row.get(c) if isinstance(row.get(c), (str, int, float, bool)) or row.get(c) is None
                        else str(row.get(c))) for c in columns})
    return out
