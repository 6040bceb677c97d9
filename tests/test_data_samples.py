"""End to end over the bundled samples (datasets/sample): both row shapes prepare cleanly and agree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import datasets
import pytest

from graph_planner.config.schema import DataConfig
from graph_planner.data.io import read_task_records
from graph_planner.data.prepare import prepare_datasets
from graph_planner.data.record import TaskRecord
from graph_planner.data.registry import register_dataset
from graph_planner.data.sources.swebench import patch_files

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "sample"
pytestmark = pytest.mark.skipif(
    not ((SAMPLE / "r2e/train.jsonl").is_file() and (SAMPLE / "swebench/test.jsonl").is_file()),
    reason="bundled sample rows not built (datasets/sample/build_rows.py)",
)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("prepared")
    config = DataConfig(output_dir=str(out), r2e_dataset=str(SAMPLE / "r2e"), swebench_dataset=str(SAMPLE / "swebench"),
                        repos_dir=str(SAMPLE / "repos"))
    summary = prepare_datasets(config, cache_dir=str(out.parent / "hf-cache"))
    assert summary.total_rejected == 0, (out / "r2e_gym/rejected.jsonl").read_text()
    return out


def _fixed_files(record: TaskRecord, source_dir: Path, work: Path) -> frozenset[tuple[str, str]]:
    """(path, content) of every file the gold patch touches, after applying it to the task's local repo copy."""
    tree = work / record.safe_id
    shutil.copytree(record.resolve_repo_path(source_dir), tree)
    (tree / "gold.diff").write_text(record.gold_patch or "")
    done = subprocess.run(["git", "apply", "gold.diff"], cwd=tree, check=False, capture_output=True, text=True)
    assert done.returncode == 0, f"{record.task_id}: {done.stderr}"
    return frozenset((p, (tree / p).read_text()) for p in patch_files(record.gold_patch or ""))


def test_sample_rows_prepare_with_local_repos_and_agree_across_shapes(prepared: Path, tmp_path: Path):
    r2e = read_task_records(prepared / "r2e_gym", "train")
    sweb = read_task_records(prepared / "swebench", "test")
    assert len(r2e) == len(datasets.load_dataset(str(SAMPLE / "r2e"), split="train", cache_dir=str(tmp_path)))
    assert len(sweb) == len(r2e) > 0
    assert all(r.repo_path and r.resolve_repo_path(prepared / "swebench").is_dir() for r in sweb)
    assert all(r.grading_mode == "r2e" and r.hidden_tests for r in r2e)
    assert all(r.fail_to_pass and r.test_files for r in sweb)
    # the gold patch rebuilt from R2E's ParsedCommit fixes the same files to the same content as SWE-bench's patch
    fixed_r2e = {_fixed_files(r, prepared / "r2e_gym", tmp_path / "r2e") for r in r2e}
    fixed_sweb = {_fixed_files(r, prepared / "swebench", tmp_path / "sweb") for r in sweb}
    assert fixed_r2e == fixed_sweb


def test_sample_registration_round_trips(prepared: Path, tmp_path: Path):
    result = register_dataset(prepared / "swebench/test.jsonl", "samples", tmp_path / "reg", "test", rllm_layout=True)
    assert result.changed and result.rows == len(read_task_records(prepared / "swebench/test.jsonl"))
    again = register_dataset(prepared / "swebench/test.jsonl", "samples", tmp_path / "reg", "test", rllm_layout=True)
    assert not again.changed
