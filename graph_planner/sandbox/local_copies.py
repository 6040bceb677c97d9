"""Temp repo copies of the local backend: each says which process owns it (an `.owner` file with the same fields as
a docker container's labels), this process removes its own at exit and on SIGTERM, and `gp sandbox reap` removes
copies whose owner is dead (a SIGKILLed run, a lost node)."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from graph_planner.sandbox.owner import LABEL_RUN, LABEL_TASK, owner_is_dead, owner_labels

OWNER_FILE = ".owner"
COPY_PREFIX = "gp-"

_live: set[Path] = set()
_live_lock = threading.Lock()


def mark_owner(root: Path, run_id: str, task_id: str) -> None:
    (root / OWNER_FILE).write_text(json.dumps(owner_labels(run_id, task_id)) + "\n", encoding="utf-8")


def track_copy(root: Path) -> None:
    """Remember a live copy so a SIGTERM / exit of this process removes it (reaper.install_exit_cleanup)."""
    with _live_lock:
        _live.add(root)


def release_copy(root: Path) -> None:
    with _live_lock:
        _live.discard(root)


def remove_own_copies() -> list[Path]:
    """Remove every copy this process still holds (signal handler / atexit); returns what was removed."""
    with _live_lock:
        roots = sorted(_live)
        _live.clear()
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)
    return roots


@dataclass
class LocalReapResult:
    removed: list[str] = field(default_factory=list)
    kept: int = 0


def reap_local_copies(base: str | Path | None = None, run_id: str | None = None,
                      dry_run: bool = False) -> LocalReapResult:
    """Remove local sandbox copies under ``base`` (default: the temp dir) whose owner process on this host is
    dead, or every copy of ``run_id``. Copies without a readable owner file are not ours: kept."""
    result = LocalReapResult()
    root = Path(base or tempfile.gettempdir())
    for path in sorted(root.glob(f"{COPY_PREFIX}*")):
        owner = path / OWNER_FILE
        try:
            labels = json.loads(owner.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(labels, dict) or LABEL_TASK not in labels:
            continue
        if not ((run_id is not None and labels.get(LABEL_RUN) == run_id) or owner_is_dead(labels)):
            result.kept += 1
            continue
        if not dry_run:
            shutil.rmtree(path, ignore_errors=True)
        result.removed.append(str(path))
    return result
