"""The seeds' commands as written: scripts/*.py entry points, data-prep / eval / train flags, seed 001 task rows,
the `repoenv` backend name. Docker-marked tests pull from the real local registry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from docker_fixtures import docker_client, remove_images, test_registry  # noqa: F401 - pytest fixtures
from test_docker_prepull import present, pushed_images
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config import load_run_config
from graph_planner.config.schema import DataConfig
from graph_planner.data.prepare import prepare_datasets
from graph_planner.data.sources.hf_loader import DataSourceError
from graph_planner.eval.api import load_eval_tasks
from graph_planner.sandbox.factory import backend_for

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_SWEBENCH = ROOT / "datasets/sample/swebench/test.jsonl"
SAMPLE_R2E = ROOT / "datasets/sample/r2e/train.jsonl"
runner = CliRunner()


def seed_script(name: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``PYTHONPATH=. python scripts/<name> ...`` exactly as the seeds run it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_seed_train_script_runs_the_section_3_commands():
    # seed 000 section 3.1 (CLI + YAML, CLI overrides win) and seed 002's --use-fallback / --dataset-name
    done = seed_script("train_graphplanner_rllm.py", "--agent", "planner", "--config-file",
                       "configs/experiments/planner_8g.yaml", "--dataset", "datasets/r2e_gym/train.jsonl",
                       "--model-path", "models/Qwen3-14B", "--cgm-model-path", "models/CodeFuse-CGM",
                       "--use-fallback", "--dataset-name", "seeded", "--print-config")
    assert done.returncode == 0, done.stderr
    printed = yaml.safe_load(done.stdout)
    assert printed["paths"]["dataset_train"] == "datasets/r2e_gym/train.jsonl"
    assert printed["env"]["use_rule_fallback"] is True and printed["data"]["dataset_name"] == "seeded"
    assert printed["resolved_config_path"] == "outputs/planner-grpo-8g/resolved_config.yaml"


def test_seed_eval_script_section_7_flags(tmp_path):
    done = seed_script("eval_graphplanner_rllm.py", "--agent", "planner", "--config-file",
                       str(ROOT / "configs/experiments/planner_8g.yaml"), "--dataset",
                       "datasets/swebench/validation.jsonl", "--docker-manifest",
                       "datasets/swebench/docker_images_validation.txt", "--dataset-split", "validation",
                       "--batch-size", "8", "--val-dataset", "datasets/r2e_gym/val.jsonl", "--prepull-containers",
                       "--prepull-max-workers", "3", "--prepull-retries", "1", "--prepull-delay", "0.5",
                       "--prepull-timeout", "30", "--print-config", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = yaml.safe_load(done.stdout)
    assert printed["paths"]["dataset_eval"] == "datasets/swebench/validation.jsonl"
    assert printed["paths"]["dataset_val"] == "datasets/r2e_gym/val.jsonl"
    assert printed["images"]["manifest"] == "datasets/swebench/docker_images_validation.txt"
    assert (printed["eval"]["split"], printed["eval"]["batch_size"]) == ("validation", 8)
    assert (printed["images"]["prepull"], printed["images"]["prepull_max_workers"], printed["images"]["prepull_retries"],
            printed["images"]["prepull_delay"], printed["images"]["prepull_timeout"]) == (True, 3, 1, 0.5, 30.0)


def test_seed_prepare_scripts_write_the_seed_layout(tmp_path):
    r2e = seed_script("prepare_training_datasets.py", "--r2e-dataset", str(SAMPLE_R2E), "--r2e-output",
                      "datasets/r2e_gym", "--r2e-val-size", "1", cwd=tmp_path)
    assert r2e.returncode == 0, r2e.stderr + r2e.stdout
    swe = seed_script("prepare_swebench_validation.py", "--swebench-dataset", str(SAMPLE_SWEBENCH),
                      "--swebench-output", "datasets/swebench", cwd=tmp_path)
    assert swe.returncode == 0, swe.stderr + swe.stdout
    out = tmp_path / "datasets"
    for path in ("r2e_gym/train.jsonl", "r2e_gym/val.jsonl", "r2e_gym/docker_images.txt", "swebench/test.jsonl"):
        assert (out / path).is_file(), path
    assert not (out / "swebench" / "train.jsonl").exists() and not (out / "r2e_gym" / "test.jsonl").exists()


def test_source_output_dirs_must_fit_the_layout(tmp_path):
    result = runner.invoke(app, ["data", "prepare", "--r2e-output", str(tmp_path / "r2e"), "--skip-swebench"])
    assert result.exit_code == 2 and "must end in /r2e_gym" in result.output
    result = runner.invoke(app, ["data", "prepare", "--r2e-output", str(tmp_path / "a/r2e_gym"),
                                 "--swebench-output", str(tmp_path / "b/swebench")])
    assert result.exit_code == 2 and "share one parent" in result.output


def test_validation_split_missing_says_swebench_has_test_only(tmp_path):
    source = tmp_path / "swe"
    source.mkdir()
    shutil.copy(SAMPLE_SWEBENCH, source / "test.jsonl")
    data = DataConfig(skip_r2e=True, swebench_dataset=str(source), swebench_split="validation",
                      output_dir=str(tmp_path / "out"))
    with pytest.raises(DataSourceError, match="publishes one split, 'test'.*--swebench-split test"):
        prepare_datasets(data)


def prepared_swebench(tmp_path: Path) -> Path:
    prepare_datasets(DataConfig(skip_r2e=True, swebench_dataset=str(SAMPLE_SWEBENCH),
                                output_dir=str(tmp_path / "prep")))
    return tmp_path / "prep" / "swebench"


def test_dataset_split_picks_the_split_file_of_a_dataset_dir(tmp_path):
    swe = prepared_swebench(tmp_path)
    rows = (swe / "test.jsonl").read_text().splitlines()
    (swe / "validation.jsonl").write_text(rows[0] + "\n")
    tasks, _ = load_eval_tasks(swe, split="validation")
    assert len(tasks) == 1 and len(load_eval_tasks(swe, split="test")[0]) == len(rows)
    with pytest.raises(FileNotFoundError, match=r"no split 'dev'.*\['test', 'validation'\]"):
        load_eval_tasks(swe, split="dev")


def seed_001_row(ds_json: str, **sandbox) -> dict:
    return {"task_id": "seed-001-task", "max_steps": 6, "issue": "Fix the wrapping bug.",
            "sandbox": {"backend": "repoenv", "docker_image": "graph-planner/repoenv-sample:latest",
                        "workdir": "/repo", "mounts": {}, "env": {"A": "1"}, "r2e_ds_json": ds_json, **sandbox}}


def test_seed_001_task_rows_are_prepared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("config").mkdir()
    Path("config/r2e_ds_repoenv_sample.json").write_text(SAMPLE_R2E.read_text().splitlines()[0])
    rows = [seed_001_row("config/r2e_ds_repoenv_sample.json"),
            {**seed_001_row("config/r2e_ds_repoenv_sample.json", mounts={"/host": "/repo"}), "task_id": "mounted"},
            {**seed_001_row("config/missing.json"), "task_id": "no-ds"},
            json.loads(SAMPLE_SWEBENCH.read_text().splitlines()[0])]
    task_file = Path("datasets/graphplanner_repoenv_train.jsonl")
    task_file.parent.mkdir()
    task_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = prepare_datasets(DataConfig(skip_r2e=True, skip_swebench=True, custom_path=str(task_file),
                                          output_dir="prepared"))
    assert summary.sources["custom"].splits["train"].kept == 1
    record = json.loads(Path("prepared/custom/train.jsonl").read_text().splitlines()[0])
    assert (record["task_id"], record["problem_statement"], record["backend"], record["image"],
            record["workdir"], record["env"]) == ("seed-001-task", "Fix the wrapping bug.", "r2egym",
                                                  "graph-planner/repoenv-sample:latest", "/repo", {"A": "1"})
    assert record["expected_output"] and record["metadata"]["r2e_row"]["repo_name"]  # graded like the R2E row
    reasons = [json.loads(line)["reason"] for line in Path("prepared/custom/rejected.jsonl").read_text().splitlines()]
    assert any("sandbox.mounts: host bind mounts are not supported" in r for r in reasons)
    assert any("sandbox.r2e_ds_json: config/missing.json not found" in r for r in reasons)
    assert any("looks like a SWE-bench row" in r and "--swebench-dataset" in r for r in reasons)


def test_repoenv_is_the_r2egym_backend():
    config = load_run_config(None, {"backends.sandbox": "repoenv"})
    assert config.backends.sandbox == "r2egym"
    assert load_run_config(None, {"backends.sandbox_override": "repoenv"}).backends.sandbox_override == "r2egym"
    from graph_planner.data.record import TaskRecord

    task = TaskRecord(task_id="t", source="custom", split="test", repo="r", problem_statement="p", backend="repoenv")
    assert task.backend == "r2egym" and backend_for(task, load_run_config(None, {})) == "r2egym"


def test_run_rule_agent_script_maps_to_gp_smoke(tmp_path):
    report = tmp_path / "smoke_report.json"
    done = seed_script("run_rule_agent.py", "--backend", "local", "--max-steps", "3", "--report", str(report),
                       "--output-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads(report.read_text())["steps"] >= 1


@pytest.mark.docker
def test_eval_prepull_flags_pull_the_manifest_before_any_episode(tmp_path, docker_client, test_registry):  # noqa: F811
    images = pushed_images(docker_client, test_registry, 1)
    manifest = tmp_path / "docker_images_validation.txt"
    manifest.write_text(images[0] + "\n")
    dataset = tmp_path / "tasks.jsonl"  # exists (a missing dataset is refused before anything, pull included)
    dataset.write_text("")
    args = ["eval", "--dataset", str(dataset), "--docker-manifest", str(manifest),
            "--prepull-containers", "--prepull-retries", "0", "--output-dir", str(tmp_path / "o")]
    try:
        missing = runner.invoke(app, [*args[:2], str(tmp_path / "missing.jsonl"), *args[3:]])
        assert missing.exit_code == 2 and "not found" in missing.output, missing.output
        assert not present(docker_client, images[0])  # a refused run pulls nothing
        result = runner.invoke(app, args)
        assert present(docker_client, images[0]), result.output  # pulled first ...
        assert "prepull failed" not in result.output and "0/0" in result.output, result.output  # ... then the eval (no task)
        manifest.write_text(f"{test_registry}/gp-prepull/never-pushed:none\n")
        failed = runner.invoke(app, args)
        assert failed.exit_code == 2 and "prepull failed" in failed.output and "never-pushed" in failed.output
    finally:
        remove_images(docker_client, images)


def test_seed_001_sample_files_prepare(tmp_path, monkeypatch):
    """config/r2e_ds_repoenv_sample.json + datasets/graphplanner_repoenv_sample.jsonl as seed 001 names them
    (the image is a bundled sample's: `gp images build` makes it)."""
    monkeypatch.chdir(ROOT)
    summary = prepare_datasets(DataConfig(skip_r2e=True, skip_swebench=True, output_dir=str(tmp_path / "p"),
                                          custom_path="datasets/graphplanner_repoenv_sample.jsonl"))
    assert summary.sources["custom"].splits["train"].kept == 1
    ds = json.loads((ROOT / "config/r2e_ds_repoenv_sample.json").read_text())
    record = json.loads((tmp_path / "p/custom/train.jsonl").read_text())
    assert record["backend"] == "r2egym" and record["image"] == ds["docker_image"]


def test_train_prepull_runs_before_training_or_says_where_to_run_it(tmp_path, caplog):
    from graph_planner.integrations.ray_cluster import prepull_here

    result = runner.invoke(app, ["train", "-c", str(ROOT / "configs/experiments/local_debug.yaml"),
                                 "--prepull-containers", "--docker-manifest", str(tmp_path / "missing.txt"),
                                 "--output-dir", str(tmp_path / "o")])
    assert result.exit_code == 2 and "docker manifest not found" in result.output  # before any training step
    assert not list((tmp_path / "o").rglob("checkpoints"))
    remote = load_run_config(None, {"images.prepull": True, "training.backend": "verl",
                                    "resources.ray_address": "http://cluster:8265",
                                    "images.manifest": str(tmp_path / "missing.txt")})
    with caplog.at_level("WARNING"):
        assert not prepull_here(remote, ["train"])  # nothing pulled here: the cluster's nodes run the sandboxes
    assert "run `gp images prepull` on its nodes" in caplog.text
