"""The before/after report's GRPO line: the training reward of the GRPO phase itself, read back from the run's
JSONL metrics, so the demo's last lines say whether GRPO (not only SFT) raised the reward."""

from __future__ import annotations

import json

from graph_planner.training.learning_report import grpo_curve, render_markdown, summary_lines


def _metrics(run_dir, rewards, resumed_step=None):
    rows = [{"kind": "config", "config": {}}, {"kind": "metrics", "step": 0, "metrics": {"reward/mean": 9.0}}]
    rows += [{"kind": "metrics", "step": k, "metrics": {"reward/mean": r}} for k, r in enumerate(rewards, start=1)]
    if resumed_step is not None:  # a resumed run logs its step again; the last value counts
        rows.append({"kind": "metrics", "step": resumed_step, "metrics": {"reward/mean": 0.5}})
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    (run_dir / "resolved_config.yaml").write_text("{}\n", encoding="utf-8")  # what marks a run dir


def test_grpo_curve_reads_the_runs_metrics_above_the_checkpoint(tmp_path):
    run = tmp_path / "runs" / "demo"
    checkpoint = run / "checkpoints" / "step_8" / "model"
    checkpoint.mkdir(parents=True)
    _metrics(run, [-0.2, -0.1, 0.0, -0.1, 0.1, 0.2, 0.3, 0.2], resumed_step=8)

    curve = grpo_curve(checkpoint)

    assert curve["reward_mean"] == [-0.2, -0.1, 0.0, -0.1, 0.1, 0.2, 0.3, 0.5]  # step 0 skipped, resume wins
    # first 5 vs last 5 steps, capped to halves of an 8-step curve: the windows never overlap
    assert curve["window"] == 4 and curve["first"] == -0.1 and curve["last"] == 0.275
    assert curve["rise"] == 0.375
    report = {"splits": {"train": "t.jsonl"}, "episodes_per_task": 1, "synthesizer": "oracle", "note": "n",
              "rows": {"base": {"train": {"parse_error_rate": 1.0, "resolved_rate": 0.0, "loc_m_recall": 0.0,
                                          "reward_mean": -0.3}}}, "grpo_training": curve}
    line = "GRPO training reward/mean, first 4 vs last 4 of 8 steps: -0.100 -> +0.275 (+0.375)"
    assert line in render_markdown(report) and summary_lines(report)[-1] == line


def test_grpo_curve_is_none_without_metrics(tmp_path):
    (tmp_path / "model").mkdir()
    assert grpo_curve(tmp_path / "model") is None
