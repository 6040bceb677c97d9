"""`gp smoke` end to end on a bundled sample task (local backend, real sandbox, rule agent): the diagnostic gold
synthesiser resolves it, `none` cannot; the trajectory JSONL replays to the same observations."""

from __future__ import annotations

import json

import pytest
from docker_fixtures import base_image, docker_client  # noqa: F401 - pytest fixtures
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.codegraph import GraphCache
from graph_planner.config.schema import RunConfig
from graph_planner.env.commands import load_task, run_smoke
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.env.replay import read_trajectory_jsonl, replay
from graph_planner.env.samples import sample_task
from graph_planner.models.synthesizers import NoSynthesizer
from graph_planner.sandbox.factory import make_sandbox

TASK_ID = "graphplanner-samples__invcalc-9"


@pytest.fixture(scope="module")
def gold_run(tmp_path_factory):
    logs = tmp_path_factory.mktemp("smoke-gold")
    config = RunConfig.model_validate({"backends": {"cgm_backend": "gold"}, "paths": {"cache_dir": str(logs)}})
    task, dataset_dir = load_task(TASK_ID, None, "swebench")
    return run_smoke(config, task, dataset_dir, logs, max_steps=6), logs


def test_smoke_with_gold_synthesizer_resolves_the_sample_task(gold_run):
    report, logs = gold_run
    assert report.resolved and report.termination_reason == "submitted" and report.reward == 1.0
    assert report.diagnostic == "gold" and report.synthesizer == "gold" and report.policy == "rule"
    assert report.patch_stats["kept"] == 1 and report.steps <= 6
    rows = read_trajectory_jsonl(report.trajectory)
    names = [r["action"]["name"] for r in rows[1:]]
    assert names[0] == "explore_find" and names[-2:] == ["repair", "submit"] and "memory_commit" in names
    runs = [json.loads(line) for line in (logs / "test_runs.jsonl").read_text().splitlines()]
    assert runs[-1]["kind"] == "grading" and runs[-1]["resolved"] is True and runs[-1]["statuses"]


def test_trajectory_replays_to_the_same_observations(gold_run, tmp_path):
    report, _ = gold_run
    task = sample_task(TASK_ID)
    config = RunConfig()
    with make_sandbox(task, config, None, "test-replay") as sandbox:
        env = PlannerEnv(task, sandbox, config.env, synthesizer=NoSynthesizer(), graph_cache=GraphCache(tmp_path))
        result = replay(report.trajectory, env)
        assert result.ok, result.mismatches[:1]
        assert result.steps == report.steps
        assert sandbox.diff() != ""  # the recorded gold proposal was applied again


def test_smoke_cli_with_no_synthesizer_is_not_resolved(tmp_path):
    report_path = tmp_path / "smoke_report.json"
    result = CliRunner().invoke(app, [
        "smoke", "--backend", "local", "--task", TASK_ID, "--max-steps", "6", "--synthesizer", "none",
        "--report", str(report_path), "--log-dir", str(tmp_path / "logs"), "--output-dir", str(tmp_path / "runs"),
        "--set", f"paths.cache_dir={tmp_path / 'cache'}", "--require-resolved",
    ])
    assert result.exit_code == 1, result.output  # --require-resolved: not resolved -> exit 1
    report = json.loads(report_path.read_text())
    assert report["resolved"] is False and report["synthesizer"] == "none" and report["diagnostic"] is None
    assert report["patch_stats"]["no_patch"] == {"synthesis-disabled": 1}
    assert (tmp_path / "logs" / "trajectory.jsonl").is_file()
    assert (tmp_path / "runs" / "graph-planner-latest" / "resolved_config.yaml").is_file()  # an unnamed run's own dir


def test_smoke_cli_unknown_task_lists_the_available_ones(tmp_path):
    result = CliRunner().invoke(app, ["smoke", "--task", "nope", "--output-dir", str(tmp_path)])
    assert result.exit_code == 2 and "graphplanner-samples__textkit-7" in result.output


def test_smoke_on_an_r2e_shaped_task_grades_by_expected_output(tmp_path):
    config = RunConfig.model_validate({"backends": {"cgm_backend": "gold"}, "paths": {"cache_dir": str(tmp_path)}})
    task, dataset_dir = load_task(None, None, "r2e")
    assert task.grading_mode == "r2e" and task.hidden_tests
    report = run_smoke(config, task, dataset_dir, tmp_path / "logs", max_steps=6)
    assert report.resolved and report.patch_stats["kept"] == 1
    runs = [json.loads(line) for line in (tmp_path / "logs" / "test_runs.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in runs] == ["repair_baseline", "repair", "grading"]  # R2E rows: baseline measured
    assert runs[0]["passing"] < runs[1]["passing"] == runs[1]["total"]


@pytest.mark.docker
def test_smoke_on_the_docker_backend(docker_client, base_image, tmp_path):  # noqa: F811
    from graph_planner.sandbox.images import build_sample_images

    task, dataset_dir = load_task(TASK_ID, None, "swebench")
    [build] = build_sample_images([task], ".", client=docker_client, base_image=base_image)
    assert build.status in ("built", "cached"), build.reason
    config = RunConfig.model_validate({"backends": {"cgm_backend": "gold", "sandbox": "docker"},
                                       "paths": {"cache_dir": str(tmp_path)}})
    report = run_smoke(config, task, dataset_dir, tmp_path / "logs", max_steps=6)
    assert report.backend == "docker" and report.resolved and report.diagnostic == "gold"
