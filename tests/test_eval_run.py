"""Evaluation on the bundled sample tasks, real local sandboxes: outputs, report, resume after SIGKILL, Ray."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graph_planner.config import load_run_config
from graph_planner.env.samples import LOCAL_DEBUG_CONFIG
from graph_planner.eval.api import evaluate_dataset
from graph_planner.eval.results import ResultsStore, TaskResult

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def prepared(bundled_samples) -> Path:
    """The bundled samples prepared exactly as `gp data prepare -c local_debug.yaml` does (once a session)."""
    return bundled_samples / "swebench" / "test.jsonl"


def rule_config(tmp_path: Path, synthesizer: str, limit: int, **extra):
    overrides = {"logging.output_dir": str(tmp_path), "experiment.run_name": f"ev-{synthesizer}",
                 "backends.planner_backend": "rule", "backends.cgm_backend": synthesizer, "eval.limit": limit,
                 "eval.batch_size": 2, "paths.cache_dir": str(tmp_path / "cache"), **extra}
    return load_run_config(LOCAL_DEBUG_CONFIG, overrides, write=True)


def test_eval_writes_predictions_results_report_and_plots(tmp_path, prepared):
    cfg = rule_config(tmp_path, "gold", limit=2, **{"eval.baselines": True})
    outcome = evaluate_dataset(cfg, prepared)
    run_dir = outcome.run_dir
    preds = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert {p["instance_id"] for p in preds} == {r.instance_id for r in outcome.results if r.label == "policy"}
    # SWE-bench's three keys (the harness reads only those) and our verdict and kept test output beside them
    assert all(set(p) == {"instance_id", "model_name_or_path", "model_patch", "verdict", "test_output"}
               for p in preds)
    assert all(p["verdict"] == "resolved" for p in preds)
    for p in preds:  # each instance keeps its final test run's output, as the harness keeps test_output.txt
        kept = (run_dir / p["test_output"]).read_text()
        assert p["test_output"].endswith("/test_output.txt") and kept.startswith("verdict: resolved")
        assert " PASSED " in kept or "PASSED " in kept
    assert all(p["model_patch"].startswith("diff --git") for p in preds)
    rows = ResultsStore(run_dir / "results.jsonl").load("policy")
    assert len(rows) == 2 and all(r.resolved and r.category == "resolved" for r in rows)
    assert all(r.tests.get("FAIL_TO_PASS", {}).get("failure") == [] for r in rows)
    assert all(r.info["diagnostic"] == "gold" for r in rows)  # the gold synthesiser is labelled as a diagnostic
    # ... and so is every output of the run: a diagnostic run never passes for a model's results
    assert all(p["model_name_or_path"].startswith("DIAGNOSTIC-gold-synthesiser__") for p in preds)
    assert (run_dir / "report.md").read_text().startswith("# Evaluation report: ev-gold — DIAGNOSTIC (gold)")
    assert json.loads((run_dir / "report.json").read_text())["diagnostic"] == "gold"
    report = json.loads((run_dir / "report.json").read_text())
    assert report["resolved"] == 2 and report["labels"]["baseline:empty"]["resolved"] == 0
    assert report["labels"]["baseline:gold"]["resolved"] == 2
    for png in ("resolved_rate.png", "outcomes.png", "steps_hist.png"):
        assert (run_dir / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "baseline:gold" in (run_dir / "report.md").read_text()


def test_an_oracle_run_is_labelled_diagnostic_in_every_output(tmp_path, prepared):
    outcome = evaluate_dataset(rule_config(tmp_path, "oracle", limit=1), prepared)
    run_dir = outcome.run_dir
    assert outcome.summary["diagnostic"] == "oracle"
    assert (run_dir / "report.md").read_text().startswith("# Evaluation report: ev-oracle — DIAGNOSTIC (oracle)")
    [pred] = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert pred["model_name_or_path"] == "DIAGNOSTIC-oracle-synthesiser__ev-oracle"


def test_eval_without_synthesiser_resolves_nothing(tmp_path, prepared):
    cfg = rule_config(tmp_path, "none", limit=2)
    outcome = evaluate_dataset(cfg, prepared)
    assert outcome.summary["resolved"] == 0 and outcome.summary["diagnostic"] is None
    assert {r.category for r in outcome.results} <= {"no_patch", "unresolved", "timeout"}
    assert "DIAGNOSTIC" not in (outcome.run_dir / "predictions.jsonl").read_text()
    assert all(r.model_patch == "" for r in outcome.results)


def test_results_store_drops_torn_line_and_retries_errors(tmp_path):
    store = ResultsStore(tmp_path / "results.jsonl")
    store.append(TaskResult(instance_id="a", resolved=True, category="resolved"))
    store.append(TaskResult(instance_id="b", status="error", category="sandbox_error", error="engine gone"))
    with (tmp_path / "results.jsonl").open("a") as fh:
        fh.write('{"instance_id": "c", "status": "fin')  # killed mid-write
    store = ResultsStore(tmp_path / "results.jsonl")
    assert store.finished_ids() == {"a"}  # b errored: tried again; c was torn: tried again
    store.append(TaskResult(instance_id="b", category="unresolved"))
    rows = {r.instance_id: r for r in store.load()}
    assert rows["b"].status == "finished" and len(rows) == 2


@pytest.mark.slow
def test_eval_killed_with_sigkill_resumes_without_loss_or_duplicates(tmp_path, prepared):
    args = [sys.executable, "-m", "graph_planner.cli", "eval", "-c", str(LOCAL_DEBUG_CONFIG),
            "--dataset", str(prepared),
            "--limit", "4", "--batch-size", "1", "--run-name", "killed", "--output-dir", str(tmp_path),
            "--set", "backends.planner_backend=rule", "--set", "backends.cgm_backend=gold",
            "--set", f"paths.cache_dir={tmp_path / 'cache'}"]
    results = tmp_path / "killed" / "eval" / "results.jsonl"
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "eval finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = ResultsStore(results).finished_ids()
    assert 1 <= len(done_before) < 4
    finished = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert "already finished" in finished.stderr
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    ids = [x["instance_id"] for x in lines if x["label"] == "policy"]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 4  # nothing lost, nothing duplicated
    preds = [json.loads(x)["instance_id"] for x in (results.parent / "predictions.jsonl").read_text().splitlines()]
    assert sorted(preds) == sorted(ids)


@pytest.mark.ray
@pytest.mark.slow
def test_eval_on_ray_executor_streams_results(tmp_path, prepared, monkeypatch):
    """No cluster configured: the executor starts a private local one with its own token, as `make test` runs it
    (RAY_AUTH_MODE=token, no token anywhere) with a fresh HOME, and writes nothing there (before, ~/.ray/auth_token
    appeared with mode 0644)."""
    ray = pytest.importorskip("ray")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    for key in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(key, raising=False)
    cfg = rule_config(tmp_path, "gold", limit=3, **{"eval.executor": "ray", "resources.ray_num_cpus": 2})
    seen: list[str] = []
    outcome = evaluate_dataset(cfg, prepared, on_result=lambda r, done, total: seen.append(r.instance_id))
    assert not ray.is_initialized()  # the private cluster ends with the run
    assert len(seen) == 3 and outcome.summary["resolved"] == 3
    assert all(r.info.get("node") for r in outcome.results)
    assert not (home / ".ray").exists()
    # each task's final test output and trajectory come back from the node and are kept as the local executor keeps
    # them (the node need not share the driver's disk)
    eval_dir = Path(outcome.run_dir)
    for row in outcome.results:
        assert row.test_output and (eval_dir / row.test_output).read_text().startswith("verdict: resolved"), row
    assert len(list((eval_dir / "trajectories").glob("*.jsonl"))) == 3


def test_files_a_ray_node_sends_back_stay_inside_the_eval_dir(tmp_path):
    """A node's test output / trajectory names are written under the eval dir; a name leading out of it is dropped."""
    from graph_planner.eval.ray_executor import write_episode_files

    eval_dir = tmp_path / "eval"
    write_episode_files(eval_dir, {"logs/t-1/test_output.txt": "verdict: resolved\n", "../escaped.txt": "x",
                                   str(tmp_path / "absolute.txt"): "y"})
    assert (eval_dir / "logs" / "t-1" / "test_output.txt").read_text() == "verdict: resolved\n"
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "absolute.txt").exists()
