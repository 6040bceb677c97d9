"""`gp grade`: any SWE-bench predictions file graded with this project's grading — gold resolves, empty does
not, a force-pass conftest / pytest-config patch is unresolved, a link patch is rejected; bad input exits 2."""

from __future__ import annotations

import json

import pytest
from attack_repo import FORCE_PASS_HOOK, PYPROJECT, AttackRepo
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.data.io import write_task_records


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[AttackRepo, str]:
    attack = AttackRepo(tmp_path_factory.mktemp("grade-cli"))
    file = attack.root / "test.jsonl"
    write_task_records(file, [attack.task()])
    return attack, str(file)


def _grade(tmp_path, dataset_file: str, rows: list[dict] | bytes, *extra: str):
    predictions = tmp_path / "preds.jsonl"
    if isinstance(rows, bytes):
        predictions.write_bytes(rows)
    else:
        predictions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["grade", "--dataset", dataset_file, "--predictions", str(predictions),
                                      "--sandbox", "local", "--report", str(report), *extra])
    return result, (json.loads(report.read_text()) if report.exists() else None)


@pytest.mark.parametrize(("label", "make_patch", "status"), [
    ("gold", lambda a: a.gold, "resolved"),
    ("empty", lambda a: "", "empty_patch"),
    ("force-pass conftest", lambda a: a.patch({"tests/conftest.py": FORCE_PASS_HOOK}), "unresolved"),
    ("pyproject addopts plugin", lambda a: a.patch({
        "pyproject.toml": PYPROJECT.replace('"-p no:cacheprovider"', '"-p forcepass"'),
        "forcepass.py": FORCE_PASS_HOOK}), "unresolved"),
    ("symlink", lambda a: "diff --git a/pw b/pw\nnew file mode 120000\n--- /dev/null\n+++ b/pw\n@@ -0,0 +1 @@\n"
                          "+/etc/passwd\n", "rejected"),
])
def test_gp_grade_grades_each_prediction(tmp_path, dataset, label, make_patch, status):
    attack, file = dataset
    rows = [{"instance_id": "calc__calc-7", "model_name_or_path": label, "model_patch": make_patch(attack)}]
    result, report = _grade(tmp_path, file, rows)
    assert result.exit_code == 0, result.output
    [instance] = report["instances"]
    assert instance["status"] == status and instance["resolved"] == (status == "resolved")
    if status == "unresolved":
        assert instance["guard"] and instance["fail_to_pass"]["failure"] == ["tests/test_add.py::test_add"]
    if status == "rejected":
        assert "symbolic link" in instance["rejection"]
    assert report["summary"][status] == 1


def test_gp_grade_names_unknown_instances_and_exits_3(tmp_path, dataset):
    _, file = dataset
    result, report = _grade(tmp_path, file, [{"instance_id": "nope__nope-1", "model_patch": "x"}])
    assert result.exit_code == 3
    assert report["instances"][0]["error"] == "instance nope__nope-1 is not in the dataset"


def test_gp_grade_bad_input_exits_2_naming_the_problem(tmp_path, dataset):
    _, file = dataset
    result, _ = _grade(tmp_path, file, b'{"instance_id": "calc__calc-7", "model_patch": "\xff"}\n')
    assert result.exit_code == 2 and "not UTF-8" in " ".join(result.output.split())
    result, _ = _grade(tmp_path, file, [{"model_patch": "x"}])
    assert result.exit_code == 2
    assert "line 1: needs an object with a string instance_id" in " ".join(result.output.split())
