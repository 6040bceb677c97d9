"""Telemetry: trackers (stdout, JSONL, TensorBoard, W&B), the seed's metric dicts, GPU / Ray heartbeats."""

from graph_planner.telemetry.heartbeat import Heartbeat
from graph_planner.telemetry.metrics import episode_metrics, parallel_metrics, passthrough
from graph_planner.telemetry.session import run_telemetry
from graph_planner.telemetry.trackers import (
    InMemoryTracker,
    JsonlTracker,
    MultiTracker,
    StdoutTracker,
    TensorboardTracker,
    Tracker,
    make_tracker,
)

__all__ = [
    "Heartbeat",
    "InMemoryTracker",
    "JsonlTracker",
    "MultiTracker",
    "StdoutTracker",
    "TensorboardTracker",
    "Tracker",
    "episode_metrics",
    "make_tracker",
    "parallel_metrics",
    "passthrough",
    "run_telemetry",
]
