"""Registration into verl parquet rows (+ rLLM layout) and docker manifest resolution."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_data_rows import r2e_row, verified_row

from graph_planner.data.io import write_task_records
from graph_planner.data.manifest import (
    ManifestError,
    collect_images,
    read_manifest,
    resolve_manifest,
    write_manifest,
)
from graph_planner.data.record import BuildSpec, TaskRecord
from graph_planner.data.registry import AGENT_NAME, RegistrationError, load_registry, register_dataset
from graph_planner.data.sources.r2e_gym import normalize_r2e_row
from graph_planner.data.sources.swebench import normalize_swebench_row


@pytest.fixture
def records() -> list[TaskRecord]:
    return [normalize_swebench_row(verified_row(), "test", 30), normalize_r2e_row(r2e_row(), "test", 30)]


def test_verl_rows_carry_the_task_but_the_prompt_never_shows_grading_data(records, tmp_path: Path):
    jsonl = write_task_records(tmp_path / "test.jsonl", records)
    result = register_dataset(jsonl, "gp", tmp_path / "reg", "test")
    assert result.changed and result.rows == 2 and Path(result.path) == tmp_path / "reg/gp/test.parquet"
    table = pq.read_table(result.path)
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info", "agent_name"]
    rows = table.to_pylist()
    assert [r["data_source"] for r in rows] == ["graph_planner/swebench", "graph_planner/r2e_gym"]
    assert {r["ability"] for r in rows} == {"swe"} and {r["agent_name"] for r in rows} == {AGENT_NAME}
    assert rows[0]["reward_model"] == {"style": "rule", "ground_truth": "django__django-11099"}
    assert rows[1]["extra_info"]["index"] == 1 and rows[1]["extra_info"]["split"] == "test"
    assert TaskRecord.model_validate_json(rows[1]["extra_info"]["task"]) == records[1]
    for row, record in zip(rows, records):
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        prompt = json.dumps(row["prompt"])
        assert record.problem_statement.splitlines()[0] in prompt
        secrets = [*record.fail_to_pass, *record.pass_to_pass, *(record.expected_output or {}),
                   *record.hidden_tests.values(), record.gold_patch, record.test_patch, "HINT-TEXT-SECRET"]
        for secret in filter(None, secrets):
            assert secret not in prompt


def test_reregistering_unchanged_input_is_a_noop_and_changed_input_rewrites(records, tmp_path: Path):
    jsonl = write_task_records(tmp_path / "train.jsonl", records)
    first = register_dataset(jsonl, "gp", tmp_path / "reg", "train")
    os.utime(first.path, (1_000_000, 1_000_000))
    again = register_dataset(jsonl, "gp", tmp_path / "reg", "train")
    assert not again.changed and again.rows == 2 and again.content_sha256 == first.content_sha256
    assert os.stat(first.path).st_mtime == 1_000_000
    write_task_records(jsonl, records[:1])
    third = register_dataset(jsonl, "gp", tmp_path / "reg", "train")
    assert third.changed and third.rows == 1 and pq.read_table(third.path).num_rows == 1
    assert load_registry(tmp_path / "reg") == {"gp": {"train": {
        "path": "gp/train.parquet", "rows": 1, "content_sha256": third.content_sha256, "rllm_path": None}}}


def test_rllm_layout_matches_dataset_registry_verl_files(records, tmp_path: Path):
    jsonl = write_task_records(tmp_path / "train.jsonl", records)
    plain = register_dataset(jsonl, "gp", tmp_path / "reg", "train")
    result = register_dataset(jsonl, "gp", tmp_path / "reg", "train", rllm_layout=True)
    assert result.changed, "asking for the rLLM layout must write it even when the verl file is current"
    assert Path(result.rllm_path) == tmp_path / "reg/rllm/gp/train_verl.parquet"
    verl_rows = pq.read_table(result.rllm_path).to_pylist()
    assert verl_rows[0]["prompt"] == [{"role": "user", "content": "placeholder"}]
    assert verl_rows[0]["reward_model"] == {"style": "rule", "ground_truth": None}
    assert verl_rows[0]["extra_info"]["task_id"] == "django__django-11099"
    assert TaskRecord.model_validate_json(verl_rows[0]["extra_info"]["task"]) == records[0]
    raw = pq.read_table(tmp_path / "reg/rllm/gp/train.parquet").to_pylist()
    assert [r["task_id"] for r in raw] == [r.task_id for r in records]
    assert result.content_sha256 == plain.content_sha256


def test_registration_refuses_empty_input_and_path_like_names(tmp_path: Path):
    empty = tmp_path / "train.jsonl"
    empty.write_text("")
    with pytest.raises(RegistrationError, match="no TaskRecords"):
        register_dataset(empty, "gp", tmp_path / "reg", "train")
    with pytest.raises(RegistrationError, match="invalid dataset name '../x'"):
        register_dataset(empty, "../x", tmp_path / "reg", "train")


def test_collect_images_unique_in_order_without_none_or_build_only(records):
    extra = records[0].model_copy(update={"task_id": "other", "image": None})
    built = records[0].model_copy(update={"task_id": "b", "image": "local/b:1",
                                          "build": BuildSpec(base_image="base", repo="repos/x")})
    images = collect_images([records[1], records[0], records[0], extra, built])
    assert images == [records[1].image, records[0].image]


def test_manifest_precedence_explicit_then_existing_then_collected(records, tmp_path: Path):
    data = tmp_path / "data"
    write_task_records(data / "test.jsonl", records)
    (data / "rejected.jsonl").write_text('{"reason": "not a record"}\n')
    collected = resolve_manifest(None, data / "test.jsonl")
    assert collected == data / "docker_images.txt"
    assert read_manifest(collected) == [r.image for r in records]
    assert read_manifest(data / "docker_images_test.txt") == [r.image for r in records]
    collected.write_text("# curated\nmy/image:1\n\n")
    assert read_manifest(resolve_manifest(None, data)) == ["my/image:1"]  # existing wins over collecting
    explicit = tmp_path / "pinned.txt"
    explicit.write_text("pinned/image:2\n")
    assert resolve_manifest(str(explicit), data) == explicit
    with pytest.raises(ManifestError, match="docker manifest not found"):
        resolve_manifest(str(tmp_path / "missing.txt"), data)
    with pytest.raises(ManifestError, match="no TaskRecord JSONL"):
        resolve_manifest(None, tmp_path / "empty-dir")


def test_manifest_of_a_prepared_root_collects_from_its_source_dirs(records, tmp_path: Path):
    write_task_records(tmp_path / "out/swebench/test.jsonl", records[:1])
    write_task_records(tmp_path / "out/r2e_gym/train.jsonl", records[1:])
    path = resolve_manifest(None, tmp_path / "out")
    assert read_manifest(path) == [records[1].image, records[0].image]
    assert write_manifest(tmp_path / "w", {"a": records, "b": records[:1]}).read_text().count("\n") == 2
