"""Experiment trackers (stdout, JSONL, TensorBoard, W&B) behind one small protocol, chosen by the run config.

`make_tracker(config, run_dir)` builds a `MultiTracker` from ``logging.trackers()`` (``track_with`` wins over
``log_backend``) plus W&B when ``logging.wandb.enabled``; ``logging.tracker_kwargs[<name>]`` goes to that
tracker's constructor. Every config a tracker sees is secret-free (`graph_planner.telemetry.redact`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

import yaml
from rich.console import Console
from rich.text import Text
from typing_extensions import Self

from graph_planner.config.schema import RunConfig
from graph_planner.telemetry.best_effort import CLOSE_TIMEOUT_S, BestEffort, SendHealth
from graph_planner.telemetry.redact import scrub, secret_values
from graph_planner.telemetry.scalars import scalar

log = logging.getLogger(__name__)

#: Tracker names accepted by the run config; "console" is verl's name for stdout.
TRACKER_ALIASES = {"console": "stdout"}
#: Trackers that hold the run's own record rather than telemetry: their errors are the run's errors.
RECORD_TRACKERS = frozenset({"jsonl"})
#: Trackers whose calls can wait on a network or a server (W&B online, a tensorboard logdir on a network disk):
#: sent from a background thread each (telemetry.best_effort), so the run never waits on them past a bounded close.
BACKGROUND_TRACKERS = frozenset({"wandb", "tensorboard"})


@runtime_checkable
class Tracker(Protocol):
    """Where metrics go. ``step`` is the training/eval step; several calls may share one step."""

    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def log_config(self, config: Mapping[str, Any]) -> None: ...

    def finish(self) -> None: ...


def as_scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Metrics as plain floats (numpy / torch 0-d values accepted); anything else names its key in the error."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        number = scalar(value)
        if number is None:
            raise TypeError(f"metric {key!r}: expected a number, got {type(value).__name__} ({value!r})")
        out[str(key)] = number
    return out


class StdoutTracker:
    """One compact line per log call: ``step 3 │ reward/mean 0.5 │ episodes_per_min 12``."""

    def __init__(self, stream: IO[str] | None = None, precision: int = 4) -> None:
        self.console = Console(file=stream or sys.stdout, highlight=False, soft_wrap=True)
        self.precision = precision

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        line = Text(f"step {step}", style="bold")
        for key, value in metrics.items():
            line.append(" │ ", style="dim")
            line.append(key, style="cyan")
            line.append(f" {value:.{self.precision}g}" if not math.isnan(value) else " nan")
        self.console.print(line)

    def log_config(self, config: Mapping[str, Any]) -> None:
        experiment = config.get("experiment") or {}
        name = experiment.get("run_name") or experiment.get("name") or "?"
        self.console.print(Text(f"run {name}: config with {len(config)} sections", style="dim"))

    def finish(self) -> None:
        self.console.file.flush()


class JsonlTracker:
    """One JSON object per call (``kind`` = metrics | config), flushed at once so a crash loses nothing."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")

    def _write(self, row: dict[str, Any]) -> None:
        if self._file is None:
            raise RuntimeError(f"JsonlTracker({self.path}) is finished; create a new tracker to log again")
        self._file.write(json.dumps(row, default=str) + "\n")
        self._file.flush()

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self._write({"kind": "metrics", "step": step, "time": time.time(), "metrics": dict(metrics)})

    def log_config(self, config: Mapping[str, Any]) -> None:
        self._write({"kind": "config", "time": time.time(), "config": dict(config)})

    def finish(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_step_metrics(path: str | Path) -> dict[int, dict[str, Any]]:
    """The metrics a :class:`JsonlTracker` file logged, per step >= 1, in step order. A step logged again (as a
    resumed run does) keeps its last values; a line cut off by a crash is skipped."""
    steps: dict[int, dict[str, Any]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("kind") == "metrics" and int(row.get("step") or 0) >= 1:
            steps.setdefault(int(row["step"]), {}).update(row.get("metrics") or {})
    return dict(sorted(steps.items()))


def truncate_step_metrics(path: str | Path, last_kept_step: int) -> int:
    """Drop the metrics rows a resumed run will log again: steps after ``last_kept_step`` (the checkpoint it
    resumes from; the killed run had gone further) and step 0 (logged at every start). Rewritten atomically;
    returns the number of rows dropped. Other rows (config) stay."""
    path = Path(path)
    if not path.is_file():
        return 0
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            dropped += 1  # a line cut off by the kill
            continue
        step = row.get("step") if isinstance(row, dict) and row.get("kind") == "metrics" else None
        if isinstance(step, int) and not 1 <= step <= last_kept_step:
            dropped += 1
            continue
        kept.append(line if line.endswith("\n") else line + "\n")
    if dropped:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text("".join(kept), encoding="utf-8")
        os.replace(tmp, path)
    return dropped


class TensorboardTracker:
    """Scalars via `torch.utils.tensorboard.SummaryWriter`; the config as a YAML text summary."""

    def __init__(self, logdir: str | Path, **writer_kwargs: Any) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:  # tensorboard is in the `train` extra
            raise RuntimeError(
                "tracker 'tensorboard' needs the tensorboard package: pip install 'graph-planner[train]'"
            ) from exc
        self.logdir = Path(logdir)
        self.writer = SummaryWriter(log_dir=str(self.logdir), **writer_kwargs)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def log_config(self, config: Mapping[str, Any]) -> None:
        text = yaml.safe_dump(dict(config), sort_keys=False)
        self.writer.add_text("config", f"```yaml\n{text}```", global_step=0)
        self.writer.flush()

    def finish(self) -> None:
        self.writer.close()


class InMemoryTracker:
    """Keeps every call in lists: for benchmarks, notebooks and callers that inspect what was logged."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict[str, float]]] = []
        self.configs: list[dict[str, Any]] = []
        self.finished = False

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.rows.append((step, dict(metrics)))

    def log_config(self, config: Mapping[str, Any]) -> None:
        self.configs.append(dict(config))

    def finish(self) -> None:
        self.finished = True


class MultiTracker:
    """Fans each call out to several trackers; thread-safe, since heartbeats log from a background thread.

    W&B and tensorboard calls go through a background sender each (``BACKGROUND_TRACKERS``): a W&B server that
    hangs or a slow logdir costs the run nothing until :meth:`finish`, which waits a bounded time
    (``best_effort.CLOSE_TIMEOUT_S``) and then logs what was dropped.

    ``last_step`` is the highest step logged so far: heartbeats log at it, because W&B drops rows whose step
    goes backwards.
    """

    def __init__(self, trackers: Mapping[str, Tracker], secrets: frozenset[str] = frozenset()) -> None:
        self.trackers = dict(trackers)
        # W&B, tensorboard, stdout are telemetry: a failing one is a warning and a summary, never a failed run;
        # the JSONL tracker is the run's own record (metrics.jsonl): its errors (a full disk) stop the run
        self._senders = {name: BestEffort(f"tracker {name}") for name in self.trackers if name in BACKGROUND_TRACKERS}
        self.health = {name: self._senders[name].stats if name in self._senders else SendHealth(f"tracker {name}")
                       for name in self.trackers if name not in RECORD_TRACKERS}
        self.last_step = 0
        #: seconds finish() waits for each background tracker's queued calls and its own finish
        self.close_timeout = CLOSE_TIMEOUT_S
        self._secrets = secrets
        self._lock = threading.Lock()
        self._finished = False

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        scalars = as_scalars(metrics)
        if not scalars:
            return
        with self._lock:
            if self._finished:
                log.debug("tracker finished; dropped %d metric(s) at step %s", len(scalars), step)
                return
            step = self.last_step if step is None else int(step)
            self.last_step = max(self.last_step, step)
            for name, tracker in self.trackers.items():
                self._call(name, tracker.log, scalars, step)

    def __call__(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """So a MultiTracker is itself a ``log_fn(metrics, step)`` callback."""
        self.log(metrics, step)

    def log_config(self, config: Mapping[str, Any]) -> None:
        clean = scrub(config, self._secrets)
        with self._lock:
            for name, tracker in self.trackers.items():
                self._call(name, tracker.log_config, clean)

    def watch(self, model: Any) -> None:
        """Forward to trackers that can watch a local model (W&B, when ``logging.wandb.watch.enabled``).

        In this thread, not through the background sender: ``watch`` only registers hooks on the local model (no
        server round trip), and they must be in place before the next backward pass, or its gradients are lost."""
        self._each("watch", model, in_caller_thread=True)

    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
        """A table (e.g. per-task eval results) to the trackers that hold tables (W&B)."""
        self._each("log_table", key, columns, rows)

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        """PNG plots to the trackers that hold images (W&B)."""
        self._each("log_images", images)

    def log_artifact(self, path: str | Path, name: str, kind: str = "model") -> None:
        """A checkpoint dir or file to the trackers that version artifacts (W&B)."""
        self._each("log_artifact", path, name, kind)

    def links(self) -> dict[str, str]:
        """Where each tracker's run can be looked at (W&B URL, or its offline dir to `wandb sync`)."""
        out: dict[str, str] = {}
        for tracker in self.trackers.values():
            if hasattr(tracker, "links"):
                out.update(tracker.links())
        return out

    def _each(self, method: str, *args: Any, in_caller_thread: bool = False) -> None:
        with self._lock:
            if self._finished:
                return
            for name, tracker in self.trackers.items():
                if hasattr(tracker, method):
                    self._call(name, getattr(tracker, method), *args, in_caller_thread=in_caller_thread)

    def _call(self, name: str, fn: Any, *args: Any, in_caller_thread: bool = False) -> None:
        sender = self._senders.get(name)
        if sender is not None and not in_caller_thread:
            sender.submit(fn, *args)
            return
        health = self.health.get(name)
        if health is None:
            fn(*args)
        else:
            health.call(fn, *args)

    def finish(self) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
            errors = []
            for name, tracker in self.trackers.items():
                sender = self._senders.get(name)
                if sender is not None:  # what is queued, then its finish, within close's bounded wait
                    sender.submit(tracker.finish)
                    sender.close(self.close_timeout)  # logs its own summary when anything failed or was dropped
                    continue
                try:
                    tracker.finish()
                except Exception as exc:  # noqa: BLE001 - finish the others; all failures are raised below
                    if name in self.health:  # telemetry: a warning, the run's result stands
                        self.health[name].record_failure(exc)
                    else:
                        errors.append(f"{name}: {exc}")
            for name, health in self.health.items():
                if name not in self._senders:
                    health.log_summary()
        if errors:
            raise RuntimeError("tracker(s) failed to finish: " + "; ".join(errors))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


def selected_trackers(config: RunConfig) -> list[str]:
    """Tracker names in order, aliases resolved, W&B added when ``logging.wandb.enabled``."""
    names: list[str] = []
    for name in config.logging.trackers():
        name = TRACKER_ALIASES.get(name, name)
        if name not in names:
            names.append(name)
    if config.logging.wandb.enabled and "wandb" not in names:
        names.append("wandb")
    return names


def make_tracker(config: RunConfig, run_dir: str | Path | None = None, job_type: str = "train") -> MultiTracker:
    """Build the trackers the config selects and log the secret-free resolved config to each.

    ``job_type`` (train / eval) labels the run where a tracker has the notion (W&B's job_type, tags, group)."""
    from graph_planner.config.loader import config_to_dict
    from graph_planner.config.paths import run_paths

    run_dir = Path(run_dir or run_paths(config).run_dir)
    names = selected_trackers(config)
    kwargs_by_name = {TRACKER_ALIASES.get(k, k): v for k, v in config.logging.tracker_kwargs.items()}
    for name in sorted(set(kwargs_by_name) - set(names)):
        log.warning("logging.tracker_kwargs.%s is set but tracker %r is not selected (%s)", name, name, names)
    secrets = frozenset(secret_values(config))
    # JSON round trip: objects passed in tracker_kwargs (a stream, say) become strings every tracker can store
    config_dict = json.loads(json.dumps(scrub(config_to_dict(config), secrets), default=str))

    trackers: dict[str, Tracker] = {}
    try:
        for name in names:
            raw = kwargs_by_name.get(name) or {}
            if not isinstance(raw, Mapping):
                raise TypeError(f"logging.tracker_kwargs.{name} must be a mapping of arguments, got {raw!r}")
            trackers[name] = _build(name, config, run_dir, config_dict, dict(raw), job_type)
    except Exception:
        for tracker in trackers.values():
            tracker.finish()
        raise
    multi = MultiTracker(trackers, secrets)
    multi.log_config(config_dict)
    return multi


def run_tags(config: RunConfig) -> list[str]:
    """Tags every tracked run carries: the config it came from, the training backend, the code's git sha."""
    from graph_planner.telemetry.wandb_tracker import git_sha

    tags = [f"config:{config.experiment.name}", f"backend:{config.training.backend}"]
    sha = git_sha()
    return [*tags, f"git:{sha}"] if sha else tags


def _build(name: str, config: RunConfig, run_dir: Path, config_dict: dict[str, Any], kwargs: dict[str, Any],
           job_type: str = "train") -> Tracker:
    from graph_planner.config.paths import run_paths

    try:
        if name == "stdout":
            return StdoutTracker(**kwargs)
        if name == "jsonl":
            return JsonlTracker(kwargs.pop("path", run_dir / "metrics.jsonl"), **kwargs)
        if name == "tensorboard":
            logdir = kwargs.pop("logdir", None) or kwargs.pop("log_dir", None)  # ROLL spells it log_dir
            return TensorboardTracker(logdir or run_dir / "tensorboard", **kwargs)
        if name == "wandb":
            from graph_planner.telemetry.wandb_tracker import WandbTracker

            # the run's own dir, also for an eval writing its files in <run dir>/evals/<key>/eval: one place per run
            root = run_paths(config).run_dir
            wandb_dir = root if run_dir.resolve().is_relative_to(root.resolve()) else run_dir
            return WandbTracker(config.logging.wandb, wandb_dir, config_dict, default_name=config.run_name,
                                job_type=job_type, tags=run_tags(config), **kwargs)
    except TypeError as exc:
        raise TypeError(f"logging.tracker_kwargs.{name}: {exc}") from exc
    raise ValueError(f"unknown tracker {name!r}; choose from wandb, tensorboard, stdout (console), jsonl")
