"""`gp validate-tasks`: gold patch must resolve, empty patch must not; failing tasks are listed, exit code 1."""

from __future__ import annotations

import json

from test_sandbox_local_fixtures import make_calc_repo, r2e_task, swebench_task
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.data.io import write_task_records

runner = CliRunner()


def _dataset(tmp_path, *extra, with_r2e=True):
    _, gold, test_patch = make_calc_repo(tmp_path)
    records = [swebench_task(tmp_path, gold, test_patch), *([r2e_task(tmp_path, gold)] if with_r2e else []),
               *[f(gold, test_patch) for f in extra]]
    return write_task_records(tmp_path / "tasks.jsonl", records)


def test_valid_tasks_pass_with_a_table_and_json_report(tmp_path):
    dataset = _dataset(tmp_path)
    report = tmp_path / "out" / "report.json"
    result = runner.invoke(app, ["validate-tasks", str(dataset), "--backend", "local", "--report", str(report)])
    assert result.exit_code == 0, result.output
    assert "calc__calc-1" in result.output and "all 2 task(s) valid" in result.output
    data = json.loads(report.read_text())
    assert [t["ok"] for t in data["tasks"]] == [True, True]
    swe = data["tasks"][0]
    assert swe["gold"]["resolved"] and not swe["empty"]["resolved"]
    assert swe["empty"]["fail_to_pass"]["failure"] == ["tests/test_add.py::test_add"]
    assert data["tasks"][1]["mode"] == "r2e"


def test_tasks_failing_validation_are_listed_and_exit_1(tmp_path):
    dataset = _dataset(
        tmp_path,
        # F2P names a test that already passes: the empty patch resolves it
        lambda gold, tp: swebench_task(tmp_path, gold, tp, task_id="already-passing",
                                       fail_to_pass=["tests/test_ops.py::test_sub"], pass_to_pass=[]),
        # the "gold" patch changes nothing relevant: it does not resolve
        lambda gold, tp: swebench_task(tmp_path, "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-calc\n+calc!\n",
                                       tp, task_id="wrong-gold"),
        with_r2e=False,
    )
    report = tmp_path / "report.json"
    result = runner.invoke(app, ["validate-tasks", str(dataset), "--report", str(report)])
    assert result.exit_code == 1, result.output
    assert "2 of 3 task(s) failed validation" in result.output
    assert "already-passing: the empty patch already resolves" in result.output
    assert "wrong-gold: gold patch does not resolve" in result.output
    failed = {t["task_id"]: t for t in json.loads(report.read_text())["tasks"] if not t["ok"]}
    assert set(failed) == {"already-passing", "wrong-gold"}
    assert failed["wrong-gold"]["gold"]["fail_to_pass"]["failure"] == ["tests/test_add.py::test_add"]


def test_task_filter_and_input_errors(tmp_path):
    dataset = _dataset(tmp_path)
    ok = runner.invoke(app, ["validate-tasks", str(dataset), "--task-id", "calc_r2e_1",
                             "--report", str(tmp_path / "r.json")])
    assert ok.exit_code == 0 and "all 1 task(s) valid" in ok.output
    assert runner.invoke(app, ["validate-tasks", str(tmp_path / "missing.jsonl")]).exit_code == 2
    assert runner.invoke(app, ["validate-tasks", str(dataset), "--backend", "podman"]).exit_code == 2
    assert runner.invoke(app, ["validate-tasks", str(dataset), "--task-id", "nope"]).exit_code == 2
