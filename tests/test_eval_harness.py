"""The official swebench 5.x harness as a second grader: rows it accepts, an eval script it grades like ours, a clear
"skipped" when images are missing, and (on the real engine) its numbers next to ours in report.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from docker_fixtures import base_image, docker_client  # noqa: F401 - pytest fixtures

from graph_planner.config import load_run_config
from graph_planner.data.gitrepo import init_deterministic_repo
from graph_planner.data.io import read_task_records
from graph_planner.env.samples import LOCAL_DEBUG_CONFIG
from graph_planner.eval.harness import harness_rows, run_swebench_harness


@pytest.fixture(scope="module")
def prepared(bundled_samples) -> Path:
    """The bundled samples prepared as `gp data prepare -c local_debug.yaml` does; returns the prepared root."""
    return bundled_samples


def swebench_tasks(prepared: Path, n: int = 2):
    return read_task_records(prepared / "swebench" / "test.jsonl")[:n]


def test_harness_rows_are_swebench5_rows_that_make_test_spec_accepts(prepared):
    from swebench.harness.utils import make_test_spec

    tasks = swebench_tasks(prepared)
    r2e = read_task_records(prepared / "r2e_gym" / "train.jsonl")[:1]
    rows = harness_rows([*tasks, *r2e])
    assert [r["instance_id"] for r in rows] == [t.task_id for t in tasks]  # R2E rows have no F2P/P2P
    for row, task in zip(rows, tasks, strict=True):
        assert all(isinstance(v, str) for v in row.values())
        assert json.loads(row["FAIL_TO_PASS"]) == task.fail_to_pass and task.fail_to_pass
        assert json.loads(row["PASS_TO_PASS"]) == task.pass_to_pass
        assert row["image"] == task.image and row["log_parser"] == "parse_log_pytest"
        assert task.test_patch in row["eval_script"]
        spec = make_test_spec(row)
        assert spec.FAIL_TO_PASS == task.fail_to_pass and spec.eval_type == "pass_and_fail"
        # the harness records the test command's exit status right after it: our script has the shape it expects
        script = spec.eval_script
        assert script.index(task.test_cmd) < script.index("SWEBENCH_TEST_EXIT_CODE=$?") < script.index(
            ">>>>> End Test Output")


@pytest.mark.parametrize("patch_kind", ["gold", "empty"])
def test_eval_script_run_on_the_repo_grades_like_the_harness(prepared, tmp_path, patch_kind):
    """No Docker: run the harness's own eval.sh (from make_test_spec) on a checkout, grade with its get_eval_report."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    [task] = swebench_tasks(prepared, 1)
    repo = shutil.copytree(prepared / "swebench" / task.repo_path, tmp_path / "testbed")
    assert init_deterministic_repo(repo) == task.base_commit
    task = task.model_copy(update={"workdir": str(repo)})
    patch = task.gold_patch if patch_kind == "gold" else ""
    if patch:
        subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=repo, check=True)
    spec = make_test_spec(harness_rows([task])[0])
    env = {**os.environ, "HOME": str(tmp_path)}  # the script adds a git safe.directory to the global config
    proc = subprocess.run(["bash", "-c", spec.eval_script], check=False, cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    log = tmp_path / "test_output.txt"
    log.write_text(proc.stdout + proc.stderr)
    pred = {"instance_id": task.task_id, "model_name_or_path": "m", "model_patch": patch or "x"}
    report = get_eval_report(spec, pred, str(log), include_tests_status=True)[task.task_id]
    assert report["resolved"] is (patch_kind == "gold"), log.read_text()[-3000:]
    assert not (repo / "tests" / "test_issue_7.py").exists()  # hidden test file removed again after the run


class EngineWithoutImages:
    """Stub of a docker client whose engine holds no image (the unit test needs no engine)."""

    class images:  # mirrors docker-py's client.images
        @staticmethod
        def get(name: str):
            import docker.errors

            raise docker.errors.ImageNotFound(f"No such image: {name}")


def test_missing_images_skip_the_harness_with_a_note(prepared, tmp_path):
    tasks = swebench_tasks(prepared)
    preds = tmp_path / "predictions.jsonl"
    preds.write_text("".join(json.dumps({"instance_id": t.task_id, "model_name_or_path": "m",
                                         "model_patch": t.gold_patch}) + "\n" for t in tasks))
    out = run_swebench_harness(tasks, preds, tmp_path, "run-x", client=EngineWithoutImages())
    assert out["ran"] is False
    assert out["note"].startswith("skipped: 2 image(s) not present locally")
    assert all(t.image in out["note"] for t in tasks)
    assert not (tmp_path / "harness").exists()  # the harness was not launched
    r2e = read_task_records(prepared / "r2e_gym" / "train.jsonl")[:2]
    assert run_swebench_harness(r2e, preds, tmp_path, "run-y")["note"].startswith("not applicable")


@pytest.mark.docker
@pytest.mark.slow
def test_report_shows_our_numbers_and_the_official_harness(prepared, tmp_path, docker_client, base_image):  # noqa: F811
    """Rule policy + gold synthesiser on 2 sample tasks, graded by us (local sandbox) and by swebench's harness
    from the tasks' images; with no synthesiser (empty patches) the harness resolves nothing."""
    from graph_planner.eval.api import evaluate_dataset
    from graph_planner.sandbox.images import build_sample_images

    dataset = prepared / "swebench" / "test.jsonl"
    tasks = swebench_tasks(prepared)
    builds = build_sample_images(tasks, dataset.parent, client=docker_client)
    assert all(b.status in ("built", "cached") for b in builds), [b.reason for b in builds]

    def run(synthesizer: str) -> dict:
        cfg = load_run_config(LOCAL_DEBUG_CONFIG, {
            "logging.output_dir": str(tmp_path), "experiment.run_name": f"harness-{synthesizer}",
            "backends.planner_backend": "rule", "backends.cgm_backend": synthesizer, "backends.sandbox": "local",
            "eval.limit": 2, "eval.batch_size": 2, "eval.use_swebench_harness": True,
            "paths.cache_dir": str(tmp_path / "cache")}, write=True)
        outcome = evaluate_dataset(cfg, dataset)
        report = json.loads((outcome.run_dir / "report.json").read_text())
        report["_md"] = (outcome.run_dir / "report.md").read_text()
        report["_dir"] = outcome.run_dir
        return report

    gold = run("gold")
    assert gold["resolved"] == 2
    harness = gold["harness"]
    assert harness["ran"] is True, harness["note"]
    assert harness["submitted"] == 2 and harness["resolved"] == 2 and harness["resolved_rate"] == 1.0
    assert sorted(harness["resolved_ids"]) == sorted(t.task_id for t in tasks)
    assert harness["note"].startswith("official swebench 5.")
    for task in tasks:  # the harness's own per-instance report, under the run dir
        [report] = (gold["_dir"] / "harness" / "logs" / "run_evaluation").glob(f"*/*/{task.task_id}/report.json")
        assert json.loads(report.read_text())[task.task_id]["tests_status"]["FAIL_TO_PASS"]["failure"] == []
    assert "| policy | 2 | 2 |" in gold["_md"] and "| swebench harness | 2 | 2 |" in gold["_md"]
    assert not [c for c in docker_client.containers.list(all=True) if harness["run_id"] in c.name]

    empty = run("none")
    assert empty["resolved"] == 0
    assert empty["harness"]["ran"] is True
    assert empty["harness"]["resolved"] == 0 and empty["harness"]["empty_patch"] == 2


def test_custom_tasks_with_fail_to_pass_go_to_the_harness_and_r2e_rows_say_why_not(tmp_path):
    from graph_planner.data.record import TaskRecord

    common = {"split": "test", "repo": "me/calc", "problem_statement": "add is wrong", "image": "local/calc:1",
              "base_commit": "a" * 40}
    custom = TaskRecord(task_id="calc-1", source="custom", fail_to_pass=["tests/t.py::test_add"], **common)
    r2e = TaskRecord(task_id="calc-2", source="r2e_gym", expected_output={"test_add": "PASSED"}, **common)
    assert [row["instance_id"] for row in harness_rows([custom, r2e])] == ["calc-1"]
    note = run_swebench_harness([r2e], tmp_path / "preds.jsonl", tmp_path, "run-z")["note"]
    assert note.startswith("not applicable: no task lists FAIL_TO_PASS/PASS_TO_PASS (native R2E rows grade by "
                           "expected outputs")
