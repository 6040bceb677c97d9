"""Prefect artifacts the UI shows on a run page: progress bars during long steps, markdown reports with the plots
inline, tables. Keys are run-scoped (flow name + run name), so each flow's history of a config stays its own.

Keys may hold only lowercase letters, digits and dashes; a keyed artifact also appears on the global Artifacts
page with its version history.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect.artifacts import (
    create_progress_artifact,
    update_progress_artifact,
)

from graph_planner.telemetry.best_effort import BestEffort


class ProgressArtifact:
    """A progress bar (0-100 %) for a long step, updated at most every ``min_interval_s`` (and always at 100 %).

    Best-effort (graph_planner.telemetry.best_effort): the API calls run on a background thread, so a Prefect
    server that is down or slow never fails or stalls the step; only the newest state is sent once it is back.
    :meth:`close` (end of the step) waits a bounded time and logs what failed."""

    def __init__(self, key: str, description: str, min_interval_s: float = 1.0) -> None:
        self.key = key
        self.description = description
        self.min_interval_s = min_interval_s
        self._id: UUID | None = None
        self._last: float | None = None
        self._sender = BestEffort("prefect artifacts")

    def update(self, done: float, total: float, description: str | None = None) -> None:
        percent = 100.0 if total <= 0 else max(0.0, min(100.0, 100.0 * done / total))
        now = time.monotonic()
        if self._last is not None and percent < 100.0 and now - self._last < self.min_interval_s:
            return
        self._last = now
        self._sender.submit(self._send, percent, description, key=self.key)

    def _send(self, percent: float, description: str | None) -> None:
        """On the sender's thread: create the artifact on the first call that reaches the API, update it after."""
        if self._id is None:
            # _sync: also safe when called from a coroutine (e.g. a log sink inside asyncio.run)
            created = create_progress_artifact(progress=percent, key=self.key, description=self.description,
                                               _sync=True)  # type: ignore[call-arg]
            self._id = created if isinstance(created, UUID) else UUID(str(created))
            return
        update_progress_artifact(artifact_id=self._id, progress=percent, description=description,
                                 _sync=True)  # type: ignore[call-arg]

    def close(self) -> None:
        self._sender.close()


def run_scope(run_name: str) -> str:
    """Key prefix ``<flow name>-<run name>``: the nightly eval and the pipeline of one config keep separate
    artifact histories (a bare run name made them interleave). Outside a flow run: ``<run name>``."""
    from prefect.runtime import flow_run

    flow_name = flow_run.flow_name if flow_run.id else None
    return artifact_key(f"{flow_name}-{run_name}" if flow_name else run_name)


def inline_png(path: str | Path, alt: str) -> str:
    """A PNG embedded in markdown as a data URI: it renders in the Prefect UI on any machine, where a ``file://``
    link opens nothing (browsers refuse it, and the file is on the worker, not the viewer's disk)."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f"![{alt}](data:image/png;base64,{data})"


def inline_plots(paths: dict[str, str | Path]) -> list[str]:
    """Markdown lines with every existing plot inline, titled."""
    lines: list[str] = []
    for title, path in paths.items():
        if Path(path).is_file():
            lines += [f"### {title}", "", inline_png(path, title), ""]
    return lines


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
