"""The bundled sample tasks (`datasets/sample/`) as TaskRecords, read through the same row normalisers as
`gp data prepare`, with `repo_path` pointing at the bundled repos, so `gp smoke`, tests and benchmarks can use
them without a prepare step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from graph_planner.data.record import LOCAL_IMAGE_NAMESPACE, TaskRecord, swebench_image_name

_REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLE_DIR = _REPO_ROOT / "datasets" / "sample"
LOCAL_DEBUG_CONFIG = _REPO_ROOT / "configs" / "experiments" / "local_debug.yaml"
SampleShape = Literal["swebench", "r2e"]
_ROWS = {"swebench": ("swebench/test.jsonl", "test"), "r2e": ("r2e/train.jsonl", "train")}


def load_sample_tasks(shape: SampleShape = "swebench", sample_dir: str | Path = SAMPLE_DIR,
                      max_steps: int = 30) -> list[TaskRecord]:
    """Every sample task of one row shape (SWE-bench or R2E-Gym)."""
    from graph_planner.data.sources.base import repo_short_name
    from graph_planner.data.sources.r2e_gym import normalize_r2e_row
    from graph_planner.data.sources.swebench import normalize_swebench_row

    root = Path(sample_dir)
    rel, split = _ROWS[shape]
    path = root / rel
    if not path.is_file():
        raise FileNotFoundError(f"sample rows not found: {path} (run datasets/sample/build_rows.py)")
    normalise = normalize_swebench_row if shape == "swebench" else normalize_r2e_row
    tasks = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = normalise(json.loads(line), split, max_steps)
        repo_dir = (root / "repos" / repo_short_name(record.repo)).resolve()
        update: dict[str, object] = {"repo_path": str(repo_dir)}
        if record.image == swebench_image_name(record.task_id):  # built locally, never under the official name
            update["image"] = swebench_image_name(record.task_id, namespace=LOCAL_IMAGE_NAMESPACE)
        tasks.append(record.model_copy(update=update))
    return tasks


def sample_task(task_id: str, shape: SampleShape = "swebench", sample_dir: str | Path = SAMPLE_DIR) -> TaskRecord:
    """One sample task by id; the error lists the ids that exist."""
    tasks = load_sample_tasks(shape, sample_dir)
    for task in tasks:
        if task.task_id == task_id:
            return task
    raise KeyError(f"no {shape} sample task {task_id!r}; available: {', '.join(t.task_id for t in tasks)}")


def prepare_bundled_samples(out_dir: str | Path) -> Path:
    """The bundled samples prepared as `gp data prepare -c configs/experiments/local_debug.yaml` does (the
    embedded default's data section, with paths anchored at the repository); returns `out_dir`, which then holds
    `swebench/test.jsonl`, `r2e_gym/train.jsonl`... For tests and benchmarks that need prepared splits."""
    from graph_planner.config import load_run_config
    from graph_planner.data.prepare import prepare_datasets

    config = load_run_config(LOCAL_DEBUG_CONFIG, {
        "data.r2e_dataset": str(SAMPLE_DIR / "r2e" / "train.jsonl"),
        "data.swebench_dataset": str(SAMPLE_DIR / "swebench" / "test.jsonl"),
        "data.repos_dir": str(SAMPLE_DIR / "repos"),
    })
    prepare_datasets(config.data, out_dir=Path(out_dir))
    return Path(out_dir)
