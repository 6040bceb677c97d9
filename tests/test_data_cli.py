"""`gp data prepare | register | manifest` through typer's CliRunner: exit codes, flags -> data.* config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from test_data_rows import r2e_rows, verified_row, write_r2e_parquet, write_verified_jsonl
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.data.io import read_task_records

runner = CliRunner()


@pytest.fixture(autouse=True)
def _hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.chdir(tmp_path)  # config defaults (prepared/, runs/) land in the temp dir


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, str]:
    return {
        "r2e": str(write_r2e_parquet(tmp_path / "in/r2e.parquet", r2e_rows(4))),
        "swebench": str(write_verified_jsonl(tmp_path / "in/verified.jsonl",
                                             [verified_row(), verified_row("psf__requests-1", FAIL_TO_PASS="x")])),
    }


def test_prepare_register_manifest_round_trip(inputs, tmp_path: Path):
    result = runner.invoke(app, ["data", "prepare", "--out", "prep", "--r2e-dataset", inputs["r2e"],
                                 "--r2e-val-size", "1", "--swebench-dataset", inputs["swebench"],
                                 "--max-steps", "9", "--hf-token", "hf_SECRET_TOKEN"])
    assert result.exit_code == 0, result.output
    assert "swebench" in result.output and "r2e_gym" in result.output
    assert [r.max_steps for r in read_task_records(tmp_path / "prep/r2e_gym/train.jsonl")] == [9, 9, 9]
    for path in (tmp_path / "prep").rglob("*"):
        assert not path.is_file() or b"hf_SECRET_TOKEN" not in path.read_bytes()

    result = runner.invoke(app, ["data", "register", "prep/r2e_gym", "prep/swebench/test.jsonl", "--name", "demo",
                                 "--out", "reg", "--rllm-layout"])
    assert result.exit_code == 0, result.output
    assert result.output.count("registered demo/") == 3  # train, val, test
    assert (tmp_path / "reg/demo/val.parquet").is_file() and (tmp_path / "reg/rllm/demo/test_verl.parquet").is_file()
    again = runner.invoke(app, ["data", "register", "prep/swebench/test.jsonl", "--name", "demo", "--out", "reg"])
    assert again.exit_code == 0 and "unchanged demo/test: 1 rows" in again.output

    (tmp_path / "prep/docker_images.txt").unlink()
    result = runner.invoke(app, ["data", "manifest", "prep"])
    assert result.exit_code == 0 and "(5 images)" in result.output  # 4 R2E + 1 SWE-bench, from the source dirs
    pinned = tmp_path / "pinned.txt"
    pinned.write_text("a/b:1\n")
    result = runner.invoke(app, ["data", "manifest", "prep", "--docker-manifest", str(pinned)])
    assert result.exit_code == 0 and f"{pinned} (1 images)" in result.output


def test_prepare_exits_1_when_every_row_is_rejected(tmp_path: Path):
    bad = write_verified_jsonl(tmp_path / "bad.jsonl", [verified_row(FAIL_TO_PASS="[]")])
    result = runner.invoke(app, ["data", "prepare", "--skip-r2e", "--swebench-dataset", str(bad), "--out", "p"])
    assert result.exit_code == 1
    assert "no task was kept (1 rejected)" in result.output


@pytest.mark.parametrize("args,message", [
    (["--set", "data.r2e_val_size=-1"], "data.r2e_val_size"),
    (["--skip-r2e", "--skip-swebench"], "nothing to prepare"),
    (["--skip-r2e", "--swebench-dataset", "missing/file.jsonl"], "dataset path not found"),
])
def test_prepare_exits_2_on_config_errors(args: list[str], message: str):
    result = runner.invoke(app, ["data", "prepare", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_yaml_config_sets_data_and_cli_wins(inputs, tmp_path: Path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"data:\n  skip_r2e: true\n  swebench_dataset: {inputs['swebench']}\n  output_dir: fromyaml\n"
                   f"  max_steps: 3\n")
    result = runner.invoke(app, ["data", "prepare", "-c", str(cfg), "--max-steps", "4"])
    assert result.exit_code == 0, result.output
    assert read_task_records(tmp_path / "fromyaml/swebench/test.jsonl")[0].max_steps == 4
    printed = runner.invoke(app, ["data", "prepare", "-c", str(cfg), "--print-config", "--hf-token", "hf_XYZ"])
    assert printed.exit_code == 0 and "skip_r2e: true" in printed.output and "hf_XYZ" not in printed.output


def test_hub_dataset_offline_fails_with_exit_2_naming_it_and_suggesting_a_local_path(tmp_path: Path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "c")}
    done = subprocess.run([sys.executable, "-m", "graph_planner.cli", "data", "prepare", "--skip-r2e",
                           "--out", str(tmp_path / "p")], check=False, capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "princeton-nlp/SWE-bench_Verified" in done.stderr and "Pass a local path" in done.stderr
