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
    """Counts and rates per label (policy and each baseline).

    An error row (sandbox died, node lost, model server down) is an attempt that produced no verdict: rates are
    over graded tasks (finished rows), errors are counted beside them, steps and seconds are averaged over the
    episodes that were played. ``completed_tasks`` is the policy's graded tasks."""
    by_label: dict[str, list[TaskResult]] = {}
    for r in results:
        by_label.setdefault(r.label, []).append(r)
    labels: dict[str, Any] = {}
    for label, rows in sorted(by_label.items()):
        graded = [r for r in rows if r.status == "finished"]
        resolved = sum(r.resolved for r in graded)
        labels[label] = {
            "tasks": len(rows),
            "graded": len(graded),
            "resolved": resolved,
            "resolved_rate": resolved / len(graded) if graded else 0.0,
            "categories": dict(Counter(r.category for r in rows)),
            "mean_steps": statistics.fmean(r.steps for r in graded) if graded else 0.0,
            "mean_seconds": statistics.fmean(r.seconds for r in graded) if graded else 0.0,
            "tokens": sum(r.tokens for r in rows),
            "errors": len(rows) - len(graded),
            "tampered": sum(r.tampered for r in graded),
            **_localisation(graded),
        }
    policy = labels.get("policy", {"graded": 0, "resolved": 0, "resolved_rate": 0.0, "tampered": 0, "errors": 0})
    diagnostic = diagnostic_of(results)
    return {
        "diagnostic": diagnostic,
        "diagnostic_note": DIAGNOSTIC_NOTE.format(kind=diagnostic) if diagnostic else None,
        "total_tasks": total_tasks,
        "completed_tasks": policy["graded"],
        "errors": policy["errors"],
        "resolved": policy["resolved"],
        "resolved_rate": policy["resolved_rate"],
        "tampered": policy["tampered"],
        "tampered_rate": policy["tampered"] / policy["graded"] if policy["graded"] else 0.0,
        "tamper_evidence": {r.instance_id: r.tamper_evidence for r in results if r.label == "policy" and r.tampered},
        "labels": labels,
    }


#: Said in the title and body of every output of a run whose patches came from a diagnostic synthesiser.
DIAGNOSTIC_NOTE = ("Diagnostic run ({kind} synthesiser): patches derived from the task's gold patch, an upper bound "
                   "of the environment, not a model result.")


def diagnostic_of(results: list[TaskResult]) -> str | None:
    """'gold', 'oracle', ... when any policy row's patches came from a diagnostic synthesiser (else None)."""
    kinds: set[str] = set()
    for r in results:
        if r.label == "policy" and r.info.get("diagnostic"):
            kinds.update(str(r.info["diagnostic"]).split(","))
    return ",".join(sorted(kinds)) or None


def diagnostic_model_name(model_name: str, results: list[TaskResult]) -> str:
    """predictions.jsonl's model_name_or_path: a diagnostic run can never pass for a model's predictions."""
    kind = diagnostic_of(results)
    return f"DIAGNOSTIC-{kind.replace(',', '+')}-synthesiser__{model_name}" if kind else model_name


def _localisation(rows: list[TaskResult]) -> dict[str, Any]:
    """Mean localisation of the gold patch's code over the rows that measured it (env/localisation.py)."""
    records = [r.info["localisation"] for r in rows if (r.info or {}).get("localisation")]
    if not records:
        return {"loc_tasks": 0}
    n = len(records)
    return {"loc_tasks": n, "loc_m_recall": sum(x["m_recall"] for x in records) / n,
            "loc_m_precision": sum(x["m_precision"] for x in records) / n,
            "loc_w_recall": sum(x["w_recall"] for x in records) / n,
            "loc_gold_read_rate": sum(x["first_gold_read_step"] is not None for x in records) / n}


def harness_verdicts(harness: dict[str, Any]) -> dict[str, str]:
    """The official harness's verdict per submitted instance (resolved / unresolved / error / empty_patch)."""
    resolved, errors = set(harness.get("resolved_ids", [])), set(harness.get("error_ids", []))
    empty = set(harness.get("empty_patch_ids", []))
    out = {}
    for instance_id in harness.get("submitted_ids") or sorted(resolved | errors | empty):
        out[instance_id] = ("resolved" if instance_id in resolved else "error" if instance_id in errors
                            else "empty_patch" if instance_id in empty else "unresolved")
    for instance_id in resolved - set(out):
        out[instance_id] = "resolved"
    return out


def harness_disagreements(results: list[TaskResult], harness: dict[str, Any]) -> list[dict[str, str]]:
    """Policy rows where the harness's resolved/not-resolved differs from ours. The harness cannot see tampering
    (it reads the same log lines), so a run we graded tampered and it graded resolved is the case to look at."""
    theirs = harness_verdicts(harness)
    return [{"instance_id": r.instance_id, "ours": r.verdict, "harness": theirs[r.instance_id]}
            for r in sorted(results, key=lambda r: r.instance_id)
            if r.label == "policy" and r.instance_id in theirs
            and (r.verdict == "resolved") != (theirs[r.instance_id] == "resolved")]


def _pct(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, (int, float)) else "-"


#: Longest free text in a report table cell: one long error or path made the Prefect UI's table scroll its
#: columns out of view at 1400 px; the whole text stays in results.jsonl. Task ids get a little more room.
MAX_CELL_CHARS = 24
MAX_ID_CHARS = 40


def table_cell(value: Any, limit: int = MAX_CELL_CHARS) -> str:
    """``value`` as one markdown table cell: one line, pipes escaped, cut to ``limit`` characters."""
    text = " ".join(str(value).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def headline(summary: dict[str, Any]) -> str:
    """The one-line result ("Resolved **1/3** (33.3%) of 4 tasks; 1 errored ..."), said once wherever the report is
    shown: the rate is over graded tasks, errors beside it."""
    errors = summary.get("errors", 0)
    return (f"Resolved **{summary['resolved']}/{summary['completed_tasks']}** "
            f"({summary['resolved_rate']:.1%}) of {summary['total_tasks']} tasks"
            + (f"; {errors} errored (no verdict; a resume plays them again)." if errors else "."))


def _plot_all(summary: dict[str, Any], results: list[TaskResult], run_dir: Path, run_name: str) -> None:
    rates = {label: s["resolved_rate"] for label, s in summary["labels"].items()}
    harness = summary.get("harness")
    if harness and harness.get("resolved_rate") is not None:
        rates["swebench harness"] = harness["resolved_rate"]
    policy = [r for r in results if r.label == "policy"]
    save_figure(plots.resolved_rate_figure(rates, run_name), run_dir / "resolved_rate.png")
    save_figure(plots.outcomes_figure(Counter(r.category for r in policy), run_name), run_dir / "outcomes.png")
    save_figure(plots.steps_figure([r.steps for r in policy if r.status == "finished"], run_name),
                run_dir / "steps_hist.png")


def render_markdown(summary: dict[str, Any], results: list[TaskResult], run_name: str) -> str:
    diagnostic = summary.get("diagnostic")
    title = f"# Evaluation report: {run_name}" + (f" — DIAGNOSTIC ({diagnostic})" if diagnostic else "")
    lines = [title, "", *([f"**{summary['diagnostic_note']}**", ""] if diagnostic else []), headline(summary), "",
             f"tampered: {summary.get('tampered', 0)} (graded runs forged from inside the test process: never "
             "resolved)", "",
             "| label | tasks | graded | resolved | rate | mean steps | errors | tampered | M recall | M precision | "
             "W recall | gold read |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, s in summary["labels"].items():
        lines.append(f"| {table_cell(label)} | {s['tasks']} | {s['graded']} | {s['resolved']} | "
                     f"{s['resolved_rate']:.1%} | {s['mean_steps']:.1f} | {s['errors']} | {s.get('tampered', 0)} | {_pct(s.get('loc_m_recall'))} | "
                     f"{_pct(s.get('loc_m_precision'))} | {_pct(s.get('loc_w_recall'))} | "
                     f"{_pct(s.get('loc_gold_read_rate'))} |")
    harness = summary.get("harness")
    if harness and harness.get("ran", True):
        lines.append(f"| swebench harness | {harness.get('submitted')} | {harness.get('submitted')} | "
                     f"{harness.get('resolved')} | {harness.get('resolved_rate', 0.0):.1%} | - | {harness.get('errors', 0)} | - |")
        lines += ["", (f"Official swebench harness: {harness.get('resolved')} resolved of "
                       f"{harness.get('submitted')} submitted ({harness.get('note', '')}).")]
        disagree = harness.get("disagreements") or []
        lines.append(f"Disagreements with our grading: {len(disagree)}"
                     + (" (" + ", ".join(f"{d['instance_id']}: ours {d['ours']}, harness {d['harness']}"
                                         for d in disagree) + ")" if disagree else "") + ".")
    elif harness:
        lines += ["", f"Official swebench harness did not run: {harness.get('note', '')}."]
    lines += ["", "Localisation (env/localisation.py): share of the gold patch's functions/classes/files held by "
              "memory M and working graph W at the end, share of episodes that read a gold node.",
              "", "| task | label | verdict | harness | agrees | category | steps | seconds | M recall | "
              "first gold read | termination |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    theirs = harness_verdicts(harness) if harness and harness.get("ran", True) else {}
    for r in sorted(results, key=lambda r: (r.label, r.instance_id)):
        loc = (r.info or {}).get("localisation") or {}
        first = loc.get("first_gold_read_step")
        other = theirs.get(r.instance_id) if r.label == "policy" else None
        agrees = "-" if other is None else ("yes" if (other == "resolved") == (r.verdict == "resolved")
                                            else "**disagree**")
        lines.append(f"| {table_cell(r.instance_id, MAX_ID_CHARS)} | {table_cell(r.label)} | {r.verdict} | "
                     f"{other or '-'} | {agrees} | "
                     f"{r.category} | {r.steps} | {r.seconds:.1f} | {_pct(loc.get('m_recall'))} | "
                     f"{'-' if first is None else f'step {first}'} | "
                     f"{table_cell(r.termination_reason or r.error or '')} |")
    forged = [r for r in results if r.tampered]
    if forged:
        lines += ["", "Tampered runs (a graded test run was forged from inside the test process; never resolved):",
                  ""] + [f"- {r.instance_id} ({r.label}): {'; '.join(r.tamper_evidence) or 'no evidence recorded'}"
                         for r in forged]
    failed = [r for r in sorted(results, key=lambda r: (r.label, r.instance_id))
              if r.test_output and r.verdict != "resolved"]
    if failed:
        lines += ["", "Test output of the final graded run (why a task was not resolved):", ""]
        lines += [f"- {r.instance_id} ({r.label}): [{r.test_output}]({r.test_output})" for r in failed]
    lines += ["", "![resolved](resolved_rate.png) ![outcomes](outcomes.png) ![steps](steps_hist.png)", ""]
    return "\n".join(lines)


def write_report(run_dir: Path, results: list[TaskResult], total_tasks: int, run_name: str,
                 harness: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write report.json, report.md and the three PNGs; return the summary dict."""
    summary = summarise(results, total_tasks)
    if harness:
        summary["harness"] = harness
        if harness.get("ran", True):
            harness["disagreements"] = harness_disagreements(results, harness)
    shown = f"{run_name} [DIAGNOSTIC: {summary['diagnostic']}]" if summary["diagnostic"] else run_name
    _plot_all(summary, results, run_dir, shown)
    summary["files"] = {name: name for name in ("predictions.jsonl", "results.jsonl", "report.md",
                                                "resolved_rate.png", "outcomes.png", "steps_hist.png")}
    summary["test_outputs"] = {r.instance_id: r.test_output for r in results if r.label == "policy" and r.test_output}
    atomic_write_text(run_dir / "report.json", json.dumps(summary, indent=2))
    atomic_write_text(run_dir / "report.md", render_markdown(summary, results, run_name))
    return summary
