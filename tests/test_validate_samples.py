"""The bundled sample tasks, prepared by `prepare_datasets` like a user would, validate on the local backend:
gold patch resolves, empty patch does not (SWE-bench shape graded by F2P/P2P, R2E shape by expected outputs)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from graph_planner.config.schema import DataConfig, RunConfig
from graph_planner.data.io import read_task_records
from graph_planner.data.prepare import prepare_datasets
from graph_planner.validation.validate import TaskValidation, validate_tasks

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "sample"
pytestmark = pytest.mark.skipif(not (SAMPLE / "swebench" / "test.jsonl").is_file(), reason="no bundled samples")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prepared")
    prepare_datasets(DataConfig(output_dir=str(out), r2e_dataset=str(SAMPLE / "r2e"),
                                swebench_dataset=str(SAMPLE / "swebench"), repos_dir=str(SAMPLE / "repos")))
    return out


@pytest.fixture(scope="module")
def validated() -> dict[tuple[Path, str], TaskValidation]:
    """Each task's validation, made once in the module: the every-task tests validate only the tasks the
    first-task tests did not (their verdicts were asserted there)."""
    return {}


def _validate(file: Path, validated: dict[tuple[Path, str], TaskValidation],
              limit: int | None = None) -> list[TaskValidation]:
    records = read_task_records(file)
    assert records, f"{file} holds no tasks"
    chosen = records[:limit] if limit else records
    todo = [record for record in chosen if (file, record.task_id) not in validated]
    if todo:
        # two tasks at a time, each in its own sandbox (as gp eval's worker threads run them)
        with ThreadPoolExecutor(max_workers=2) as pool:
            done = [task for report in pool.map(
                lambda record: validate_tasks([record], RunConfig(), file.parent, backend="local"), todo)
                for task in report.tasks]
        assert len(done) == len(todo) and all(task.ok for task in done), \
            "\n".join(f"{t.task_id}: {t.error}" for t in done if not t.ok)
        validated.update({(file, task.task_id): task for task in done})
    tasks = [validated[file, record.task_id] for record in chosen]
    assert all(task.ok for task in tasks)
    return tasks


@pytest.mark.parametrize("split_file", ["swebench/test.jsonl", "r2e_gym/train.jsonl"])
def test_first_sample_task_of_each_shape_validates_on_local(prepared, validated, split_file):
    task = _validate(prepared / split_file, validated, limit=1)[0]
    assert task.gold.resolved and not task.empty.resolved
    assert task.mode == ("swebench" if split_file.startswith("swebench") else "r2e")


@pytest.mark.slow
@pytest.mark.parametrize("split_file", ["swebench/test.jsonl", "r2e_gym/train.jsonl"])
def test_every_sample_task_validates_on_local(prepared, validated, split_file):
    _validate(prepared / split_file, validated)
