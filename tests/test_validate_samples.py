"""The bundled sample tasks, prepared by `prepare_datasets` like a user would, validate on the local backend:
gold patch resolves, empty patch does not (SWE-bench shape graded by F2P/P2P, R2E shape by expected outputs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_planner.config.schema import DataConfig, RunConfig
from graph_planner.data.io import read_task_records
from graph_planner.data.prepare import prepare_datasets
from graph_planner.validation.validate import validate_tasks

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "sample"
pytestmark = pytest.mark.skipif(not (SAMPLE / "swebench" / "test.jsonl").is_file(), reason="no bundled samples")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prepared")
    prepare_datasets(DataConfig(output_dir=str(out), r2e_dataset=str(SAMPLE / "r2e"),
                                swebench_dataset=str(SAMPLE / "swebench"), repos_dir=str(SAMPLE / "repos")))
    return out


def _validate(file: Path, limit: int | None = None):
    records = read_task_records(file)
    assert records, f"{file} holds no tasks"
    report = validate_tasks(records[:limit] if limit else records, RunConfig(), file.parent, backend="local")
    assert report.ok, "\n".join(f"{t.task_id}: {t.error}" for t in report.failed)
    return report


@pytest.mark.parametrize("split_file", ["swebench/test.jsonl", "r2e_gym/train.jsonl"])
def test_first_sample_task_of_each_shape_validates_on_local(prepared, split_file):
    report = _validate(prepared / split_file, limit=1)
    task = report.tasks[0]
    assert task.gold.resolved and not task.empty.resolved
    assert task.mode == ("swebench" if split_file.startswith("swebench") else "r2e")


@pytest.mark.slow
@pytest.mark.parametrize("split_file", ["swebench/test.jsonl", "r2e_gym/train.jsonl"])
def test_every_sample_task_validates_on_local(prepared, split_file):
    _validate(prepared / split_file)
