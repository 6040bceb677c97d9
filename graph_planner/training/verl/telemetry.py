"""Telemetry of the verl backend: the local backend's metric names, in the run's own trackers.

Two halves, one file each under ``<run dir>/verl/``:

- **agent-loop workers** (GraphPlannerAgentLoop, inside verl's AgentLoopWorker processes) append one JSON line per
  finished episode to ``episodes.jsonl`` (:func:`record_episode`): the training step it was generated for (the
  rollout's weight version + 1, from the server's ``global_steps``), its GRPO group (verl's ``uid``) and the
  env's :class:`~graph_planner.episode.summary.EpisodeSummary` (without the patch and test log);
- the **job's entry process** (``verl_entry``, which runs ``main_ppo`` in the same process) runs
  :class:`VerlTelemetryBridge`: it follows verl's ``file`` logger (``verl_metrics.jsonl``, one JSON line per step)
  and for each step logs ``episode_metrics`` of that step's episodes — the same function on the same summaries
  as the local engine, so the same names and definitions (``reward/*``, ``loc/*``, ``patch_*``, ``reject/*``,
  ``planner_parse_error_rate``, ``completions/clipped_ratio``, ...) — plus verl's own metrics under verl's names into the run's
  trackers (``run_telemetry``: stdout / JSONL / TensorBoard / W&B, ``parallel/*`` + ``resources/*`` at step 0,
  ``ray/*`` / ``gpu/*`` heartbeats; ``ray/*`` from the moment ``main_ppo``'s ``ray.init`` has attached this
  process to the job's cluster).

One process writes the trackers: a W&B run or a TensorBoard event file does not take several writers, so verl's
own ``trainer.logger`` is only ``console`` (the job log) and ``file`` (the bridge's input).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graph_planner.config.schema import RunConfig
from graph_planner.episode.summary import EpisodeSummary

log = logging.getLogger(__name__)

EPISODES_FILE = "episodes.jsonl"
VERL_METRICS_FILE = "verl_metrics.jsonl"


def telemetry_dir(config: RunConfig) -> Path:
    """``<logging.output_dir>/<run_name>/verl`` (absolute in the job's config: ``write_job_config``)."""
    from graph_planner.config.paths import run_paths

    return run_paths(config).run_dir / "verl"


def record_episode(path: Path, weights_step: int | None, summary: EpisodeSummary, seconds: float,
                   group: str | None = None) -> None:
    """Append one episode (the env's summary, its GRPO ``group``) as a JSON line; one ``write`` of one line
    with O_APPEND, so lines of concurrent workers never interleave."""
    row = {"step": None if weights_step is None else int(weights_step) + 1, "pid": os.getpid(),
           "seconds": round(seconds, 4), "group": group, "summary": summary.metrics_record()}
    data = (json.dumps(row, default=str) + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def summary_from_record(row: Mapping[str, Any]) -> EpisodeSummary:
    """The EpisodeSummary of one ``episodes.jsonl`` line (a line without one names its step)."""
    data = row.get("summary")
    if not isinstance(data, Mapping):
        raise ValueError(f"{EPISODES_FILE}: a line of step {row.get('step')} has no episode summary "
                         f"(written by an older agent loop?)")
    return EpisodeSummary.from_dict(data)


class JsonlFollower:
    """New complete lines of a JSONL file another process appends to (a partial last line waits)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        rows = []
        for line in chunk[:end].splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                log.warning("%s: skipping a line that is not JSON", self.path)
        return rows


class VerlTelemetryBridge:
    """Follows verl's step metrics and the workers' episodes; logs both per step into the run's trackers."""

    def __init__(self, config: RunConfig, run_dir: Path, poll_s: float = 1.0) -> None:
        self.config, self.run_dir, self.poll_s = config, run_dir, poll_s
        self.verl_metrics = JsonlFollower(run_dir / "verl" / VERL_METRICS_FILE)
        self.episodes = JsonlFollower(run_dir / "verl" / EPISODES_FILE)
        self.pending: dict[int | None, list[dict[str, Any]]] = {}
        self.logged_steps: list[int] = []
        self._errors: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._telemetry: Any = None
        self._tracker: Any = None

    def start(self) -> VerlTelemetryBridge:
        from graph_planner.telemetry.session import run_telemetry

        self.episodes.offset = _size(self.episodes.path)  # a resumed run's older episodes are not this job's
        self.verl_metrics.path.unlink(missing_ok=True)  # verl truncates it at start; never read a previous job's
        self._telemetry = run_telemetry(self.config, self.run_dir)
        self._tracker = self._telemetry.__enter__()
        self._thread = threading.Thread(target=self._run, name="verl-telemetry", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._drain_safely()

    def _drain_safely(self) -> None:
        """Telemetry never fails the training job: a failed drain is logged (once per error text) and retried."""
        try:
            self.drain()
        except Exception as exc:  # noqa: BLE001 - a tracker or a malformed line must not stop training
            if str(exc) not in self._errors:
                self._errors.add(str(exc))
                log.warning("telemetry bridge: %s: %s", type(exc).__name__, exc)

    def drain(self) -> None:
        """Log every step verl has written so far (with the episodes recorded for it)."""
        for row in self.episodes.read():
            self.pending.setdefault(row.get("step"), []).append(row)
        for row in self.verl_metrics.read():
            step, data = int(row.get("step", 0)), row.get("data") or {}
            self._tracker.log(self.step_metrics(step, data), step=step)
            self.logged_steps.append(step)

    def step_metrics(self, step: int, data: Mapping[str, Any]) -> dict[str, float]:
        from graph_planner.telemetry.metrics import episode_metrics, passthrough

        rows = self.pending.pop(step, []) + self.pending.pop(None, [])  # no weight version: the next step's
        out: dict[str, float] = {}
        if rows:
            seconds = float(data.get("timing_s/gen") or sum(float(r.get("seconds") or 0) for r in rows) or 1e-6)
            summaries = [summary_from_record(r) for r in rows]
            groups = [r.get("group") or s.task_id for r, s in zip(rows, summaries)]
            out.update(episode_metrics(summaries, max(seconds, 1e-6), self.config.telemetry, groups))
        out.update(passthrough(data))
        return out

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        try:
            if self._tracker is not None:
                self._drain_safely()
        finally:
            if self._telemetry is not None:
                self._telemetry.__exit__(None, None, None)

    def __enter__(self) -> VerlTelemetryBridge:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
