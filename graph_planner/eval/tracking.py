"""An eval run's results in the trackers: per-label rates as scalars, the per-task table, the report's plots, and
where the tracked run can be looked at (written into report.json so the Prefect summary can link it)."""

from __future__ import annotations

import json
from typing import Any

from graph_planner.data.io import atomic_write_text
from graph_planner.eval.runner import EvalOutcome
from graph_planner.telemetry.trackers import MultiTracker

TABLE_COLUMNS = ["instance_id", "label", "resolved", "verdict", "category", "steps", "seconds", "tokens", "termination_reason",
                 "error"]
PLOTS = ("resolved_rate.png", "outcomes.png", "steps_hist.png")


def publish_eval(tracker: MultiTracker, outcome: EvalOutcome, step: int) -> dict[str, str]:
    """Log the outcome to every tracker that takes it; return (and record in report.json) the tracker links."""
    scalars: dict[str, Any] = {"eval/resolved_rate": outcome.summary["resolved_rate"],
                               "grading/tampered_rate": outcome.summary.get("tampered_rate", 0.0)}
    for label, numbers in outcome.summary.get("labels", {}).items():
        scalars[f"eval/{label}/resolved_rate"] = numbers["resolved_rate"]
        scalars[f"eval/{label}/mean_steps"] = numbers["mean_steps"]
        scalars[f"eval/{label}/tampered"] = numbers.get("tampered", 0)
    tracker(scalars, step)
    rows = [{column: getattr(result, column, None) for column in TABLE_COLUMNS} for result in outcome.results]
    tracker.log_table("eval/tasks", TABLE_COLUMNS, rows)
    tracker.log_images({name.removesuffix(".png"): outcome.run_dir / name for name in PLOTS})
    links = tracker.links()
    if links:
        outcome.summary["tracking"] = links
        report = outcome.run_dir / "report.json"
        atomic_write_text(report, json.dumps(outcome.summary, indent=2))
    return links
