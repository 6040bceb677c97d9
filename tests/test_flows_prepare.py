"""prepare-data flow on the bundled samples: outputs, cross-run caching keyed on content, retries on I/O only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from uuid import UUID

import pytest

from flows.prepare_data import prepare_data
from flows.run_stats import settled_task_runs, step_counts
from tasks import data as data_tasks
from tasks import images, preflight, training
from tasks.retry import is_transient

CACHEABLE_PREP = ["download-and-normalise", "build-manifest", "register-dataset"]


def run(**params):
    state = prepare_data(return_state=True, **params)
    assert state.is_completed(), state.message
    return state.result(), step_counts(state.state_details.flow_run_id)


def task_runs(flow_run_id: UUID):
    return settled_task_runs(flow_run_id, settle_s=1.0, timeout_s=30.0)


def test_prepare_data_writes_registry_and_second_call_is_fully_cached(flow_workspace: Path) -> None:
    registry, first = run()
    assert sorted(first.ran) == sorted(CACHEABLE_PREP) and not first.cached
    prepared = flow_workspace / "prepared" / "sample"
    for split in ("r2e_gym/train.jsonl", "r2e_gym/val.jsonl", "swebench/test.jsonl", "docker_images.txt"):
        assert (prepared / split).is_file(), split
    index = json.loads((Path(registry) / "registry.json").read_text())
    assert set(index["graph_planner_sample"]) == {"train", "val", "test"}
    assert (Path(registry) / "graph_planner_sample" / "train.parquet").is_file()

    again, second = run()
    assert again == registry
    assert sorted(second.cached) == sorted(CACHEABLE_PREP) and second.ran == []
    assert set(second.always) == {"resolve-config", "select-images"}  # cheap, uncached by design


def test_changes_rerun_only_the_steps_that_read_them(flow_workspace: Path) -> None:
    run()
    # a training setting is not read by any data step
    _, counts = run(overrides=["training.lr=0.001"])
    assert counts.ran == [] and sorted(counts.cached) == sorted(CACHEABLE_PREP)
    # the dataset name is read by registration only
    _, counts = run(overrides=["data.dataset_name=renamed"])
    assert counts.ran == ["register-dataset"]
    # a changed source file re-runs the download and everything reading the prepared data
    sample = flow_workspace / "datasets"
    sample.unlink()
    shutil.copytree(Path(__file__).resolve().parent.parent / "datasets", sample)
    source = sample / "sample" / "swebench" / "test.jsonl"
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    rows[0]["problem_statement"] += "\n(edited)"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, counts = run()
    assert sorted(counts.ran) == sorted(CACHEABLE_PREP)
    edited = (flow_workspace / "prepared" / "sample" / "swebench" / "test.jsonl").read_text()
    assert "(edited)" in edited


def test_cached_result_pointing_at_deleted_outputs_runs_again(flow_workspace: Path) -> None:
    registry, _ = run()
    shutil.rmtree(flow_workspace / "prepared")
    again, counts = run()
    assert again == registry and Path(registry, "registry.json").is_file()
    assert "download-and-normalise" in counts.ran and "register-dataset" in counts.ran
    _, counts = run()
    assert counts.ran == []  # the fresh results are found again


def test_download_retried_after_simulated_connection_error(flow_workspace: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    real = data_tasks.prepare_datasets
    calls = []

    def flaky(*args, **kwargs):  # the network failure being simulated: the first attempt loses its connection
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("connection reset by peer (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(data_tasks, "prepare_datasets", flaky)
    state = prepare_data(return_state=True)
    assert state.is_completed(), state.message
    download = [r for r in task_runs(state.state_details.flow_run_id) if r.name.startswith("download-and-normalise")]
    assert len(calls) == 2 and download[0].run_count == 2


def test_missing_dataset_fails_at_once_without_retries(flow_workspace: Path) -> None:
    state = prepare_data(overrides=["data.swebench_dataset=datasets/sample/swebench/missing.jsonl"],
                         return_state=True)
    assert state.is_failed()
    download = [r for r in task_runs(state.state_details.flow_run_id) if r.name.startswith("download-and-normalise")]
    assert download[0].run_count == 1
    assert "missing.jsonl" in str(download[0].state.message) or "missing.jsonl" in str(state.message)


def test_only_io_steps_retry() -> None:
    io_steps = [data_tasks.download_and_normalise, images.prepull_image, training.submit_ray_job]
    deterministic = [data_tasks.build_manifest, data_tasks.register_splits, preflight.preflight,
                     training.run_training]
    assert all(t.retries >= 1 and t.retry_jitter_factor and t.retry_condition_fn for t in io_steps)
    assert all(t.retries == 0 for t in deterministic)


@pytest.mark.parametrize(("exc", "transient"), [
    (ConnectionError("reset"), True),
    (TimeoutError("slow"), True),
    (FileNotFoundError("missing.jsonl"), False),
    (ValueError("bad config"), False),
])
def test_transient_errors_are_told_apart_through_wrapping(exc: Exception, transient: bool) -> None:
    try:
        try:
            raise exc
        except Exception as inner:
            raise RuntimeError("could not load dataset") from inner
    except RuntimeError as wrapped:
        assert is_transient(wrapped) is transient
