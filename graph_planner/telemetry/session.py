"""One call for a run's telemetry: trackers from the config, the layout metrics at step 0, heartbeats running."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from graph_planner.config.schema import RunConfig
from graph_planner.telemetry.heartbeat import Heartbeat
from graph_planner.telemetry.metrics import parallel_metrics
from graph_planner.telemetry.trackers import MultiTracker, make_tracker


@contextmanager
def run_telemetry(config: RunConfig, run_dir: str | Path | None = None,
                  job_type: str = "train") -> Iterator[MultiTracker]:
    """Yield the run's tracker (also usable as ``log_fn(metrics, step)``); on exit stop heartbeats, then finish.

    Heartbeats run only when ``telemetry.log_gpu`` or ``telemetry.log_ray`` is on.
    """
    tracker = make_tracker(config, run_dir, job_type=job_type)
    heartbeat: Heartbeat | None = None
    try:
        tracker.log(parallel_metrics(config), step=0)
        if config.telemetry.log_gpu or config.telemetry.log_ray:
            heartbeat = Heartbeat.from_config(config.telemetry, tracker).start()
        yield tracker
    finally:
        if heartbeat is not None:
            heartbeat.stop()
        tracker.finish()
