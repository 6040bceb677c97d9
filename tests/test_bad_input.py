"""Bad input is named, never a traceback and never silently coerced: malformed rows (non-UTF-8 included) are
rejected by line with a reason while the rest is kept; config values are validated; a non-UTF-8 config says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph_planner.config.loader import ConfigError, load_run_config
from graph_planner.config.schema import DataConfig, RunConfig
from graph_planner.data.prepare import prepare_datasets
from graph_planner.data.record import MAX_PROBLEM_STATEMENT_CHARS
from graph_planner.env.samples import SAMPLE_DIR

ROWS = [json.loads(line) for line in (SAMPLE_DIR / "swebench" / "test.jsonl").read_text().splitlines()]


def _rejected(out: Path, source: str) -> list[dict]:
    return [json.loads(line) for line in (out / source / "rejected.jsonl").read_text().splitlines()]


def test_swebench_file_with_bad_rows_keeps_the_rest_and_names_each_line(tmp_path):
    odd_commit = {**ROWS[1], "base_commit": 1234567}
    huge = {**ROWS[3], "problem_statement": "x" * (MAX_PROBLEM_STATEMENT_CHARS + 1)}
    lines = [json.dumps(ROWS[0]).encode(), json.dumps(odd_commit).encode(),
             json.dumps(ROWS[2]).encode().replace(b"truncate", b"trunc\xff\xfeate", 1), json.dumps(huge).encode(),
             b"not json", json.dumps(ROWS[4]).encode()]
    file = tmp_path / "swebench.jsonl"
    file.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    summary = prepare_datasets(DataConfig(output_dir=str(out), skip_r2e=True, swebench_dataset=str(file),
                                          repos_dir=str(SAMPLE_DIR / "repos")))
    assert summary.total_kept == 2 and summary.total_rejected == 4
    reasons = [r["reason"] for r in _rejected(out, "swebench")]
    assert "line 2: column base_commit: number where the other rows hold str (values are not coerced)" in reasons
    assert any(r.startswith("line 3: not UTF-8") for r in reasons)
    assert any("problem_statement" in r and str(MAX_PROBLEM_STATEMENT_CHARS) in r for r in reasons)
    assert "line 5: not valid JSON (Expecting value)" in reasons


def test_custom_file_with_a_non_utf8_row_keeps_the_others(tmp_path):
    task = {"task_id": "c-1", "repo": "calc", "problem_statement": "add is wrong", "image": "x:1"}
    file = tmp_path / "tasks.jsonl"
    file.write_bytes(json.dumps(task).encode() + b"\n" + b'{"task_id": "c-\xff2"}\n'
                     + json.dumps({**task, "task_id": "c-3"}).encode() + b"\n")
    out = tmp_path / "out"
    summary = prepare_datasets(DataConfig(output_dir=str(out), skip_r2e=True, skip_swebench=True,
                                          custom_path=str(file)))
    assert summary.total_kept == 2
    [rejected] = _rejected(out, "custom")
    assert rejected["reason"] == "line 2: not UTF-8 (byte 15 of the line)"


@pytest.mark.parametrize(("memory", "ok"), [("2g", True), ("512m", True), ("1.5g", True), ("2GB", True),
                                            ("lots", False), ("1k", False), ("-1g", False), ("", False)])
def test_sandbox_memory_must_be_a_docker_size(memory, ok):
    if ok:
        assert RunConfig.model_validate({"sandbox": {"memory": memory}}).sandbox.memory == memory
    else:
        with pytest.raises(ValueError, match="sandbox.memory"):
            RunConfig.model_validate({"sandbox": {"memory": memory}})


def test_non_utf8_yaml_config_is_a_clear_error(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_bytes(b"experiment:\n  notes: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"run.yaml: not UTF-8 \(line 2, byte 24\)"):
        load_run_config(config, {})
