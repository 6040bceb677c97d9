"""Source adapters: R2E-Gym / SWE-bench / custom rows -> TaskRecord, with column-named rejection reasons."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from test_data_rows import NEW_CORE, NEW_FILE, NEW_UTIL, OLD_CORE, OLD_UTIL, r2e_row, verified_row

from graph_planner.data.sources.base import RowRejected
from graph_planner.data.sources.custom import load_custom_rows, normalize_custom_row
from graph_planner.data.sources.r2e_gym import gold_patch_from_file_diffs, is_test_path, normalize_r2e_row
from graph_planner.data.sources.swebench import normalize_swebench_row, patch_files


def test_r2e_row_becomes_task_record_with_hidden_grading_fields():
    record = normalize_r2e_row(r2e_row(), split="train", max_steps=12)
    assert record.task_id == "mylib__mylib-c0ffee0011"
    assert record.source == "r2e_gym" and record.repo == "mylib" and record.split == "train"
    assert record.image == "namanjain12/mylib_final:c0ffee00112233445566778899aabbccddeeff00"
    assert record.workdir == "/testbed"
    assert record.test_cmd == "python -m pytest -rA r2e_tests"
    assert record.base_commit == "0123456789abcdef0123456789abcdef01234567"
    assert record.expected_output == {"test_add": "PASSED"}
    assert record.hidden_tests == {"test_1.py": "from mylib.core import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"}
    assert record.grading_mode == "r2e"
    assert "[ISSUE]" not in record.problem_statement and "[/ISSUE]" not in record.problem_statement
    assert record.title == "add() subtracts in mylib c0ffee"
    assert record.max_steps == 12
    assert record.metadata["relevant_files"] == ["mylib/core.py"]
    assert "expected_output" not in record.agent_view() and "hidden_tests" not in record.agent_view()


def test_r2e_gold_patch_holds_only_non_test_python_files():
    patch = normalize_r2e_row(r2e_row(), split="train", max_steps=5).gold_patch
    assert patch is not None
    touched = patch_files(patch)
    assert touched == ["mylib/core.py", "mylib/util.py", "mylib/extra.py"]
    assert "diff --git a/mylib/core.py b/mylib/core.py\n--- a/mylib/core.py\n+++ b/mylib/core.py\n" in patch
    assert "new file mode 100644\n--- /dev/null\n+++ b/mylib/extra.py" in patch


def test_r2e_gold_patch_applies_with_git_and_reproduces_the_fix(tmp_path: Path):
    repo = tmp_path / "repo"
    (repo / "mylib").mkdir(parents=True)
    (repo / "mylib/core.py").write_text(OLD_CORE)
    (repo / "mylib/util.py").write_text(OLD_UTIL)
    patch = normalize_r2e_row(r2e_row(), split="train", max_steps=5).gold_patch
    (tmp_path / "gold.diff").write_text(patch)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    done = subprocess.run(["git", "apply", "-v", str(tmp_path / "gold.diff")], cwd=repo, check=False,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (repo / "mylib/core.py").read_text() == NEW_CORE
    assert (repo / "mylib/util.py").read_text() == NEW_UTIL  # still without a final newline
    assert (repo / "mylib/extra.py").read_text() == NEW_FILE


@pytest.mark.parametrize("path,is_test", [
    ("tests/test_core.py", True), ("pkg/test/helpers.py", True), ("pkg/test_x.py", True), ("pkg/x_test.py", True),
    ("pkg/testing.py", False), ("pkg/contest.py", False), ("pkg/core.py", False),
])
def test_r2e_test_file_rule(path: str, is_test: bool):
    assert is_test_path(path) is is_test


@pytest.mark.parametrize("overrides,reason", [
    ({"expected_output_json": "{not json"}, "expected_output_json: not valid JSON"),
    ({"expected_output_json": "[1, 2]"}, "expected_output_json: expected a JSON object, got list"),
    ({"expected_output_json": "{}"}, "expected_output_json: empty"),
    ({"docker_image": ""}, "docker_image: empty"),
    ({"problem_statement": None}, "problem_statement: null"),
    ({"problem_statement": "[ISSUE]  [/ISSUE]"}, "problem_statement: empty once [ISSUE] tags are removed"),
    ({"parsed_commit_content": json.dumps({"file_diffs": [], "old_commit_hash": "x"})},
     "parsed_commit_content: no non-test Python file changes"),
    ({"execution_result_content": json.dumps({"test_file_names": ["a.py"], "test_file_codes": []})},
     "execution_result_content: test_file_names and test_file_codes do not pair up"),
])
def test_r2e_malformed_rows_are_rejected_naming_the_column(overrides: dict, reason: str):
    with pytest.raises(RowRejected) as info:
        normalize_r2e_row(r2e_row(**overrides), split="train", max_steps=5)
    assert info.value.reason.startswith(reason)
    assert info.value.task_id == "mylib__mylib-c0ffee0011"


def test_r2e_row_missing_a_column_is_rejected_naming_it():
    row = r2e_row()
    del row["problem_statement"]
    with pytest.raises(RowRejected, match="missing column problem_statement"):
        normalize_r2e_row(row, split="train", max_steps=5)


def test_swebench_row_keeps_f2p_p2p_patches_and_harness_image_name():
    record = normalize_swebench_row(verified_row(), split="test", max_steps=30)
    assert record.task_id == "django__django-11099" and record.source == "swebench"
    assert record.image == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert record.workdir == "/testbed" and record.test_cmd == "python -m pytest -rA"
    assert record.fail_to_pass == ["tests/test_mod.py::test_f2p_secret"]
    assert record.pass_to_pass == ["tests/test_mod.py::test_p2p_keep"]
    assert record.test_files == ["tests/test_mod.py", "tests/other/test_b.py"]
    assert record.gold_patch.startswith("diff --git a/src/mod.py")
    assert record.test_patch.startswith("diff --git a/tests/test_mod.py")
    assert record.log_parser == "django"  # from swebench's own repo -> parser table
    assert record.metadata["version"] == "3.0" and record.metadata["difficulty"] == "<15 min fix"
    assert record.metadata["hints_text"] == "HINT-TEXT-SECRET"
    assert "HINT-TEXT-SECRET" not in json.dumps(record.agent_view())
    assert record.grading_mode == "swebench"


def test_swebench_accepts_list_typed_tests_and_a_row_image():
    row = verified_row("astropy__astropy-12907", FAIL_TO_PASS=["a::b"], PASS_TO_PASS=[],
                       image="registry.local/astropy:12907", log_parser="parse_log_pytest_v2")
    record = normalize_swebench_row(row, split="test", max_steps=30)
    assert record.fail_to_pass == ["a::b"] and record.pass_to_pass == []
    assert record.image == "registry.local/astropy:12907"
    assert record.log_parser == "pytest_v2"


@pytest.mark.parametrize("overrides,reason", [
    ({"FAIL_TO_PASS": "[not json"}, "FAIL_TO_PASS: not a JSON list of test ids"),
    ({"FAIL_TO_PASS": '{"a": 1}'}, "FAIL_TO_PASS: expected a JSON list of test ids, got dict"),
    ({"PASS_TO_PASS": "[1, 2]"}, "PASS_TO_PASS[0]: Input should be a valid string"),
    ({"FAIL_TO_PASS": "[]"}, "FAIL_TO_PASS: empty"),
    ({"problem_statement": ""}, "problem_statement: empty"),
    ({"patch": None}, "patch: null"),
])
def test_swebench_malformed_rows_are_rejected_naming_the_column(overrides: dict, reason: str):
    with pytest.raises(RowRejected) as info:
        normalize_swebench_row(verified_row(**overrides), split="test", max_steps=30)
    assert info.value.reason.startswith(reason), info.value.reason
    assert info.value.task_id == "django__django-11099"


def test_custom_tasks_load_from_yaml_json_and_jsonl_with_paths_resolved(tmp_path: Path):
    (tmp_path / "repos/toy").mkdir(parents=True)
    task = {"task_id": "toy-1", "repo": "me/toy", "problem_statement": "fix it", "repo_path": "repos/toy",
            "source": "swebench", "fail_to_pass": ["t::a"]}
    (tmp_path / "tasks.yaml").write_text("tasks:\n  - task_id: toy-1\n    repo: me/toy\n"
                                         "    problem_statement: fix it\n    repo_path: repos/toy\n")
    (tmp_path / "tasks.json").write_text(json.dumps([task]))
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n{broken\n")
    for name in ("tasks.yaml", "tasks.json", "tasks.jsonl"):
        index, row = load_custom_rows(tmp_path / name)[0]
        record = normalize_custom_row(row, tmp_path, max_steps=9)
        assert index == 0 and record.source == "custom" and record.split == "test" and record.max_steps == 9
        assert Path(record.repo_path) == (tmp_path / "repos/toy").resolve()
    index, broken = load_custom_rows(tmp_path / "tasks.jsonl")[1]
    with pytest.raises(RowRejected, match="line 2: not valid JSON"):
        normalize_custom_row(broken, tmp_path, max_steps=9)


def test_custom_task_with_missing_repo_dir_or_unknown_field_is_rejected(tmp_path: Path):
    with pytest.raises(RowRejected, match="repo_path: directory not found"):
        normalize_custom_row({"task_id": "t", "repo": "r", "problem_statement": "p", "repo_path": "nope"},
                             tmp_path, 5)
    with pytest.raises(RowRejected, match="colour: Extra inputs are not permitted"):
        normalize_custom_row({"task_id": "t", "repo": "r", "problem_statement": "p", "colour": "red"}, tmp_path, 5)


def test_gold_patches_of_scattered_edits_apply_exactly(tmp_path: Path):
    """Edits at the head, tail and middle of long files (and lost final newlines) survive the diff rebuild."""
    rng = random.Random(7)
    diffs, expected = [], {}
    for n in range(25):
        noise = ["", "", "\x0c", "\r"]  # form feeds / CRs must not split lines (git splits on \n only)
        old = [f"line {i} {rng.randrange(5)}{rng.choice(noise)}\n" if i % 7 else "\n"
               for i in range(rng.randrange(1, 400))]
        new = list(old)
        for _ in range(rng.randrange(1, 5)):
            at = rng.randrange(len(new) + 1)
            choice = rng.random()
            if choice < 0.4 and at < len(new):
                new[at] = f"changed {n}\n"
            elif choice < 0.7:
                new.insert(at, f"inserted {n}\n")
            elif new:
                del new[min(at, len(new) - 1)]
        old_text, new_text = "".join(old), "".join(new)
        if rng.random() < 0.3:
            new_text = new_text.rstrip("\n")
        if new_text == old_text:
            continue
        path = f"pkg/mod_{n}.py"
        (tmp_path / "pkg").mkdir(exist_ok=True)
        (tmp_path / path).write_text(old_text)
        diffs.append({"header": {"file": {"path": path}}, "old_file_content": old_text, "new_file_content": new_text})
        expected[path] = new_text
    (tmp_path / "all.diff").write_text(gold_patch_from_file_diffs(diffs))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    done = subprocess.run(["git", "apply", "all.diff"], cwd=tmp_path, check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for path, text in expected.items():
        assert (tmp_path / path).read_bytes() == text.encode(), path
