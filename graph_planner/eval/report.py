"""Eval reports: report.json, report.md and PNG plots (resolved rate, outcome categories, steps histogram)."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from graph_planner.data.io import atomic_write_text
from graph_planner.eval.results import TaskResult
from graph_planner.telemetry import plots
from graph_planner.telemetry.plots import save_figure


def summarise(results: list[TaskResult], total_tasks: int) -> dict[str, Any]:
    """Counts and rates per label (policy and each baseline)."""
    by_label: dict[str, list[TaskResult]] = {}
    for r in results:
        by_label.setdefault(r.label, []).append(r)
    labels: dict[str, Any] = {}
    for label, rows in sorted(by_label.items()):
        resolved = sum(r.resolved for r in rows)
        steps = [r.steps for r in rows]
        labels[label] = {
            "tasks": len(rows),
            "resolved": resolved,
            "resolved_rate": resolved / len(rows) if rows else 0.0,
            "categories": dict(Counter(r.category for r in rows)),
            "mean_steps": statistics.fmean(steps) if steps else 0.0,
            "mean_seconds": statistics.fmean(r.seconds for r in rows) if rows else 0.0,
            "tokens": sum(r.tokens for r in rows),
            "errors": sum(r.status == "error" for r in rows),
        }
    policy = labels.get("policy", {"tasks": 0, "resolved": 0, "resolved_rate": 0.0})
    return {
        "total_tasks": total_tasks,
        "completed_tasks": policy["tasks"],
        "resolved": policy["resolved"],
        "resolved_rate": policy["resolved_rate"],
        "labels": labels,
    }


def _plot_all(summary: dict[str, Any], results: list[TaskResult], run_dir: Path, run_name: str) -> None:
    rates = {label: s["resolved_rate"] for label, s in summary["labels"].items()}
    harness = summary.get("harness")
    if harness and harness.get("resolved_rate") is not None:
        rates["swebench harness"] = harness["resolved_rate"]
    policy = [r for r in results if r.label == "policy"]
    save_figure(plots.resolved_rate_figure(rates, run_name), run_dir / "resolved_rate.png")
    save_figure(plots.outcomes_figure(Counter(r.category for r in policy), run_name), run_dir / "outcomes.png")
    save_figure(plots.steps_figure([r.steps for r in policy], run_name), run_dir / "steps_hist.png")


def render_markdown(summary: dict[str, Any], results: list[TaskResult], run_name: str) -> str:
    lines = [f"# Evaluation report: {run_name}", "",
             (f"Resolved **{summary['resolved']}/{summary['completed_tasks']}** "
              f"({summary['resolved_rate']:.1%}) of {summary['total_tasks']} tasks."), "",
             "| label | tasks | resolved | rate | mean steps | errors |", "|---|---|---|---|---|---|"]
    for label, s in summary["labels"].items():
        lines.append(f"| {label} | {s['tasks']} | {s['resolved']} | {s['resolved_rate']:.1%} | "
                     f"{s['mean_steps']:.1f} | {s['errors']} |")
    harness = summary.get("harness")
    if harness and harness.get("ran", True):
        lines.append(f"| swebench harness | {harness.get('submitted')} | {harness.get('resolved')} | "
                     f"{harness.get('resolved_rate', 0.0):.1%} | - | {harness.get('errors', 0)} |")
        lines += ["", (f"Official swebench harness: {harness.get('resolved')} resolved of "
                       f"{harness.get('submitted')} submitted ({harness.get('note', '')}).")]
    elif harness:
        lines += ["", f"Official swebench harness did not run: {harness.get('note', '')}."]
    lines += ["", "| task | label | resolved | category | steps | seconds | termination |",
              "|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.label, r.instance_id)):
        lines.append(f"| {r.instance_id} | {r.label} | {'yes' if r.resolved else 'no'} | {r.category} | "
                     f"{r.steps} | {r.seconds:.1f} | {r.termination_reason or r.error or ''} |")
    lines += ["", "![resolved](resolved_rate.png) ![outcomes](outcomes.png) ![steps](steps_hist.png)", ""]
    return "\n".join(lines)


def write_report(run_dir: Path, results: list[TaskResult], total_tasks: int, run_name: str,
                 harness: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write report.json, report.md and the three PNGs; return the summary dict."""
    summary = summarise(results, total_tasks)
    if harness:
        summary["harness"] = harness
    _plot_all(summary, results, run_dir, run_name)
    summary["files"] = {name: name for name in ("predictions.jsonl", "results.jsonl", "report.md",
                                                "resolved_rate.png", "outcomes.png", "steps_hist.png")}
    atomic_write_text(run_dir / "report.json", json.dumps(summary, indent=2))
    atomic_write_text(run_dir / "report.md", render_markdown(summary, results, run_name))
    return summary
