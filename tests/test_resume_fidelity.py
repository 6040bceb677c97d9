"""A resumed local training run records each step once in metrics.jsonl, and checkpoint temp dirs a killed save
left are removed when the next run starts (graph_planner/training/local/run.prepare_resume)."""

from __future__ import annotations

import json
from collections import Counter

from graph_planner.config import load_run_config
from graph_planner.env.samples import LOCAL_DEBUG_CONFIG
from graph_planner.training.local.checkpoint import META_FILE, STATE_FILE, checkpoint_root
from graph_planner.training.local.run import prepare_resume


def _killed_run(tmp_path, resume_from: str | None = "auto"):
    config = load_run_config(LOCAL_DEBUG_CONFIG, {"logging.output_dir": str(tmp_path), "experiment.name": "r",
                                                  "training.resume_from": resume_from})
    run_dir = tmp_path / config.run_name
    root = checkpoint_root(run_dir)
    step_1 = root / "step_1"
    step_1.mkdir(parents=True)
    (step_1 / META_FILE).write_text(json.dumps({"step": 1}))
    (step_1 / STATE_FILE).write_bytes(b"state")
    (root / "latest").write_text("step_1")
    orphan = root / ".step_2.tmp-0123abcd"  # killed while saving step 2
    (orphan / "model").mkdir(parents=True)
    rows = [{"kind": "config", "config": {}}] + [{"kind": "metrics", "step": s, "metrics": {"loss": s}}
                                                  for s in (0, 1, 2)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"kind": "metr')
    return config, run_dir, orphan


def test_a_resume_drops_the_rows_past_its_checkpoint_and_the_orphan_save(tmp_path):
    config, run_dir, orphan = _killed_run(tmp_path)
    prepare_resume(config)
    assert not orphan.exists()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = Counter(r["step"] for r in rows if r["kind"] == "metrics")
    assert steps == {1: 1}  # step 0 is logged again at start, step 2 is trained again
    assert rows[0]["kind"] == "config"
    # the resumed run then logs 0 and 2: each step once
    with (run_dir / "metrics.jsonl").open("a") as f:
        for s in (0, 2):
            f.write(json.dumps({"kind": "metrics", "step": s, "metrics": {}}) + "\n")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert Counter(r["step"] for r in rows if r["kind"] == "metrics") == {0: 1, 1: 1, 2: 1}


def test_a_fresh_run_keeps_the_metrics_but_still_removes_the_orphan(tmp_path):
    config, run_dir, orphan = _killed_run(tmp_path, resume_from=None)
    before = (run_dir / "metrics.jsonl").read_bytes()
    prepare_resume(config)
    assert not orphan.exists()
    assert (run_dir / "metrics.jsonl").read_bytes() == before
