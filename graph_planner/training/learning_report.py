"""Before/after numbers of a training run: the base model, the model after the SFT warm start and after GRPO,
each playing the training tasks and the val tasks through the very path GRPO rollouts take (PolicyHandle:
same prompt budget, same sampling, same env, same synthesiser).

Per stage and split: planner parse error rate, resolved rate, mean episode reward and the localisation recall of
the gold patch's code in memory M (env/localisation.py). Written as ``learning.json`` and ``learning.md``.
A toy model trained on a handful of tasks is not expected to generalise: the val columns show that honestly.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from graph_planner.config.schema import RunConfig, TelemetryConfig
from graph_planner.disk import atomic_write_text
from graph_planner.episode.turns import Trajectory

log = logging.getLogger(__name__)

METRICS = ("parse_error_rate", "resolved_rate", "loc_m_recall", "reward_mean")
NOTE = ("A toy model trained on a few tasks is not expected to generalise: the train columns show what SFT and "
        "GRPO learned, the val columns that it does not transfer (yet).")


def score(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Parse error rate over turns, resolved rate, mean M recall of the gold code, mean reward of episodes: the
    definitions both training engines log (:func:`graph_planner.telemetry.metrics.episode_metrics`)."""
    from graph_planner.telemetry.metrics import episode_metrics

    if not trajectories:
        return {"episodes": 0.0, "parse_error_rate": 0.0, "resolved_rate": 0.0, "loc_m_recall": 0.0,
                "reward_mean": 0.0}
    m = episode_metrics(trajectories, 1.0, TelemetryConfig(log_planner_parse_errors=True))
    return {"episodes": m["episodes"], "parse_error_rate": m["planner_parse_error_rate"],
            "resolved_rate": m["reward/resolved_rate"], "loc_m_recall": m.get("loc/m_recall", 0.0),
            "reward_mean": m["reward/mean"]}


def play(config: RunConfig, model_dir: str, dataset: str, episodes_per_task: int) -> dict[str, float]:
    """``episodes_per_task`` episodes of every task of ``dataset`` by the model in ``model_dir`` (seeded)."""
    from graph_planner.imports import import_lock
    from graph_planner.models.loading import load_causal_lm
    from graph_planner.models.toy import resolve_model_path
    from graph_planner.training.local.policy_handle import PolicyHandle
    from graph_planner.training.local.rollout import make_env_rollout

    with import_lock():  # the report's episodes run in threads that import transformers too
        import torch
        from transformers import AutoTokenizer
    path = resolve_model_path(model_dir, config.paths.cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = load_causal_lm(path, dtype=torch.float32)
    model.eval()
    t = config.training
    handle = PolicyHandle(model, tokenizer, t.max_prompt_length, t.max_response_length)
    tasks, rollout_fn = make_env_rollout(config, dataset)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.experiment.seed)
        trajectories = rollout_fn(handle, tasks, episodes_per_task)
    return score(trajectories)


def grpo_curve(checkpoint: str | Path, window: int = 5) -> dict[str, Any] | None:
    """The GRPO phase's own curve: per-step ``reward/mean`` from the ``metrics.jsonl`` of the run that wrote
    ``checkpoint`` (found above it), with the means of the first and last ``window`` steps and their difference.
    None when no such file is found (e.g. a run without the JSONL tracker)."""
    from graph_planner.config.checkpoints import run_dir_of
    from graph_planner.telemetry.trackers import read_step_metrics
    from graph_planner.training.learning_curve import window_means

    run_dir = run_dir_of(checkpoint)  # local step_<k>/model or verl global_step_<k>/actor/huggingface alike
    path = run_dir / "metrics.jsonl" if run_dir is not None else None
    if path is None or not path.is_file():
        return None
    curve = [float(m["reward/mean"]) for m in read_step_metrics(path).values() if "reward/mean" in m]
    if not curve:
        return None
    w = max(1, min(window, len(curve) // 2))
    first, last = window_means(curve, w)
    return {"reward_mean": [round(r, 4) for r in curve], "window": w, "first": round(first, 4),
            "last": round(last, 4), "rise": round(last - first, 4), "metrics": str(path)}


def compare_stages(config: RunConfig, stages: dict[str, str], splits: dict[str, str], out_dir: str | Path,
                   episodes_per_task: int = 1, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Play every stage's model on every split; write ``learning.json`` / ``learning.md`` into ``out_dir``.
    With a ``grpo`` stage, the report also holds the GRPO phase's training-reward curve (:func:`grpo_curve`).
    ``progress`` gets a line per stage and split played (default: this module's logger)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if config.training.torch_threads is not None:
        import torch

        torch.set_num_threads(config.training.torch_threads)
    started = time.monotonic()
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for stage, model in stages.items():
        rows[stage] = {}
        for split, dataset in splits.items():
            rows[stage][split] = row = play(config, model, dataset, episodes_per_task)
            (progress or log.info)(f"learning report: {stage} on {split}: parse errors {row['parse_error_rate']:.0%}, "
                                   f"resolved {row['resolved_rate']:.0%}, reward {row['reward_mean']:+.3f}")
    report = {"stages": stages, "splits": splits, "episodes_per_task": episodes_per_task,
              "synthesizer": config.backends.cgm_backend, "rows": rows,
              "seconds": round(time.monotonic() - started, 2), "note": NOTE,
              "grpo_training": grpo_curve(stages["grpo"]) if "grpo" in stages else None}
    atomic_write_text(out / "learning.json", json.dumps(report, indent=2))
    atomic_write_text(out / "learning.md", render_markdown(report))
    return report


def render_markdown(report: dict[str, Any]) -> str:
    """The before/after table: one row per stage, train and val side by side."""
    splits = list(report["splits"])
    head = ["stage"] + [f"{split}: {name}" for split in splits for name in ("parse errors", "resolved", "M recall",
                                                                           "reward")]
    lines = ["## Learning: base -> SFT warm start -> GRPO", "",
             f"Each model plays every task {report['episodes_per_task']} time(s) per split, the way GRPO rollouts do "
             f"(synthesiser `{report['synthesizer']}`"
             + (", a diagnostic: the gold patch only when memory M holds the code it changes" if
                report["synthesizer"] == "oracle" else "") + ").", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for stage, by_split in report["rows"].items():
        cells = [stage]
        for split in splits:
            m = by_split[split]
            cells += [f"{m['parse_error_rate']:.0%}", f"{m['resolved_rate']:.0%}", f"{m['loc_m_recall']:.0%}",
                      f"{m['reward_mean']:+.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", report["note"], ""]
    if report.get("grpo_training"):
        lines += [grpo_line(report["grpo_training"]), ""]
    return "\n".join(lines)


def grpo_line(curve: dict[str, Any]) -> str:
    """One sentence on the GRPO phase's training reward: first vs last steps."""
    return (f"GRPO training reward/mean, first {curve['window']} vs last {curve['window']} of "
            f"{len(curve['reward_mean'])} steps: {curve['first']:+.3f} -> {curve['last']:+.3f} "
            f"({curve['rise']:+.3f})")


def summary_lines(report: dict[str, Any]) -> list[str]:
    """Plain-text table for a terminal (the demo's last lines)."""
    splits = list(report["splits"])
    lines = [f"{'stage':<6}" + "".join(f" | {split + ' parse-err/resolved/loc-recall/reward':<44}" for split in splits)]
    for stage, by_split in report["rows"].items():
        cells = "".join(f" | {by_split[s]['parse_error_rate']:>6.0%} {by_split[s]['resolved_rate']:>6.0%} "
                        f"{by_split[s]['loc_m_recall']:>6.0%} {by_split[s]['reward_mean']:>+8.3f}{'':<13}"
                        for s in splits)
        lines.append(f"{stage:<6}{cells}")
    if report.get("grpo_training"):
        lines.append(grpo_line(report["grpo_training"]))
    return lines
