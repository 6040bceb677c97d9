"""The whole DAG end to end on the embedded default (bundled tasks, local sandbox, toy model, local GRPO, eval),
shrunk to one training step and two eval tasks; then the same call again re-executes no cached step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.pipeline import pipeline
from flows.run_stats import step_counts

pytestmark = pytest.mark.slow
SHRINK = ["training.total_steps=1", "eval.limit=2"]
CACHEABLE = ["download-and-normalise", "build-manifest", "register-dataset", "train", "evaluate"]


def artifacts_of(flow_run_id) -> dict[str, tuple[str, str]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(
            any_=[flow_run_id])))
    return {a.key: (a.type, str(a.data)) for a in found if a.key}


def test_pipeline_runs_end_to_end_then_fully_from_cache(flow_workspace: Path) -> None:
    state = pipeline(overrides=SHRINK, return_state=True)
    assert state.is_completed(), state.message
    report = Path(state.result())
    run_id = state.state_details.flow_run_id
    assert sorted(step_counts(run_id).ran) == sorted(CACHEABLE)

    eval_dir = report.parent
    summary = json.loads((eval_dir / "report.json").read_text())
    assert summary["total_tasks"] == 2 and summary["completed_tasks"] == 2
    assert len((eval_dir / "predictions.jsonl").read_text().splitlines()) == 2
    run_dir = (flow_workspace / "runs" / "local_debug-latest").resolve()  # unnamed: runs/local_debug-<UTC stamp>
    assert run_dir.name.startswith("local_debug-20") and report.resolve().is_relative_to(run_dir)
    checkpoints = run_dir / "checkpoints"
    assert (checkpoints / "step_1" / "model" / "config.json").is_file()
    resolved = (run_dir / "resolved_config.yaml").read_text()
    assert "total_steps: 1" in resolved
    assert "group: pipeline-" in resolved  # one W&B group per pipeline run (not a cache key: see the rerun below)

    artifacts = artifacts_of(run_id)
    scope = "pipeline-local-debug"  # flow name + run name: the nightly eval's history stays its own
    kind, markdown = artifacts[f"{scope}-report"]
    assert kind == "markdown" and "Resolved **" in markdown
    for title in ("Training curves", "Resolved rate", "Outcomes", "Steps per episode"):
        assert f"![{title}](data:image/png;base64," in markdown  # inline, renders on any machine
    assert "| task | label | verdict |" in markdown  # the per-task table inline
    assert "file://" not in markdown
    assert artifacts[f"{scope}-eval-results"][0] == "table"
    assert all(json.loads(artifacts[f"{scope}-eval-results"][1])[i]["instance_id"] for i in range(2))
    for bar in ("training-progress", "eval-progress"):
        assert artifacts[f"{scope}-{bar}"][0] == "progress" and float(artifacts[f"{scope}-{bar}"][1]) == 100.0
    kind, config_md = artifacts[f"{scope}-resolved-config"]
    assert kind == "markdown" and "```yaml" in config_md and "total_steps: 1" in config_md
    assert not [key for key in artifacts if not key.startswith(scope)], sorted(artifacts)

    again = pipeline(overrides=SHRINK, return_state=True)
    assert again.is_completed() and Path(again.result()) == report  # the cached steps' outputs: the first run's
    rerun_dir = (flow_workspace / "runs" / "local_debug-latest").resolve()
    assert rerun_dir != run_dir and (rerun_dir / "resolved_config.yaml").is_file()  # its own dir, decided once
    counts = step_counts(again.state_details.flow_run_id)
    assert counts.ran == [] and sorted(counts.cached) == sorted(CACHEABLE)
    assert "pipeline-local-debug-report" in artifacts_of(again.state_details.flow_run_id)  # on cached runs too
