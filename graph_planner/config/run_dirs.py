"""Which directory a run writes to, so runs of one config never mix.

A *named* run (``experiment.run_name`` / ``--run-name``, or the seed's ``logging.wandb.run_name``) keeps
``<logging.output_dir>/<run_name>`` (training refuses to clobber a previous training run there unless
``training.resume_from`` is set; eval resumes there). An *unnamed* run gets its own
``<logging.output_dir>/<experiment.name>-<UTC YYYYmmdd-HHMMSS>`` (``-2``, ``-3`` ... on a collision), decided once
when the run starts (:func:`claim_run_dir`: the loader with ``write=True``, the flows' resolve-config step) and
recorded as ``resolved_run_dir`` in resolved_config.yaml, so every later step and a resume from that file use the
same directory; ``<logging.output_dir>/<experiment.name>-latest`` links to the newest one. The recorded directory
is in no step's cache key (``RunConfig.field_affects``).
"""

from __future__ import annotations

import itertools
import logging
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from graph_planner.config.paths import (
    CHECKPOINTS,
    RESOLVED_CONFIG,
    is_named,
    latest_link,
    named_run_dir,
    recorded_run_dir,
)

if TYPE_CHECKING:
    from graph_planner.config.schema import RunConfig

log = logging.getLogger(__name__)

TIMESTAMP = "%Y%m%d-%H%M%S"


def claim_run_dir(config: RunConfig, now: datetime | None = None) -> Path:
    """Decide and create the directory of a run being started, and record it in ``config.resolved_*``.

    Named or already recorded: that directory. Otherwise a fresh ``<name>-<UTC stamp>`` (claimed with an exclusive
    mkdir, so two runs started in the same second get ``-2``), and ``<name>-latest`` is moved to it."""
    run_dir = named_run_dir(config) if is_named(config) else recorded_run_dir(config)
    if run_dir is None:
        run_dir = _fresh_dir(Path(config.logging.output_dir), config.experiment.name,
                             (now or datetime.now(timezone.utc)).strftime(TIMESTAMP))
        point_latest(latest_link(config), run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config.resolved_run_dir = str(run_dir)
    config.resolved_config_path = str(run_dir / RESOLVED_CONFIG)
    return run_dir


def _fresh_dir(root: Path, name: str, stamp: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        candidate = root / (f"{name}-{stamp}" if n == 1 else f"{name}-{stamp}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise AssertionError("unreachable")


def point_latest(link: Path, run_dir: Path) -> None:
    """Atomically point ``link`` at ``run_dir`` (a relative symlink, so the output dir can move; where symlinks
    are unavailable, a text file holding the directory's name)."""
    tmp = link.parent / f".{link.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        tmp.symlink_to(run_dir.name, target_is_directory=True)
    except OSError:
        tmp.write_text(run_dir.name + "\n", encoding="utf-8")
    try:
        os.replace(tmp, link)
    except OSError as exc:  # e.g. a real directory of that name: the run goes on, only the pointer is stale
        tmp.unlink(missing_ok=True)
        log.warning("could not point %s at %s: %s", link, run_dir, exc)


class RunDirInUse(ValueError):
    """A training run that does not resume would write into a directory holding a previous training run."""


def previous_training(run_dir: str | Path) -> list[Path]:
    """What an earlier training run left in ``run_dir``: a non-empty ``checkpoints/`` (local or verl) and its
    ``metrics.jsonl``."""
    run_dir = Path(run_dir)
    root = run_dir / CHECKPOINTS
    found = [root] if root.is_dir() and any(root.iterdir()) else []
    return found + [p for p in (run_dir / "metrics.jsonl",) if p.is_file()]


def refuse_clobber(run_dir: str | Path, resume_from: str | None) -> None:
    """Raise :class:`RunDirInUse` when a fresh start (``resume_from`` unset) would mix with an earlier run."""
    found = previous_training(run_dir) if resume_from is None else []
    if found:
        raise RunDirInUse(
            f"run directory {run_dir} already holds a training run ({', '.join(p.name for p in found)}) and "
            "training.resume_from is not set, so this run would mix its checkpoints and metrics with it. "
            "Resume that run with --set training.resume_from=auto, or start a new one under another run name "
            "(--run-name NAME; a run without experiment.run_name / logging.wandb.run_name gets its own "
            "<name>-<UTC timestamp> dir).")


def latest_run_dir(config: RunConfig) -> Path | None:
    """The directory ``<name>-latest`` points at (symlink or text file), or None when no unnamed run started yet."""
    link = latest_link(config)
    if link.is_symlink():
        return link.parent / os.readlink(link)
    if link.is_file():
        return link.parent / link.read_text(encoding="utf-8").strip()
    return None
