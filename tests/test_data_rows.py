"""Row builders for the data tests: real R2E-Gym-Lite / SWE-bench Verified column names and HF types.

No tests here; the test_data_* modules import these builders (pytest puts tests/ on sys.path).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets

R2E_FEATURES = datasets.Features({
    "repo_name": datasets.Value("string"),
    "docker_image": datasets.Value("string"),
    "commit_hash": datasets.Value("string"),
    "parsed_commit_content": datasets.Value("string"),
    "execution_result_content": datasets.Value("string"),
    "modified_files": datasets.List(datasets.Value("string")),
    "modified_entity_summaries": datasets.List({
        "ast_type_str": datasets.Value("string"),
        "end_lineno": datasets.Value("int64"),
        "file_name": datasets.Value("string"),
        "name": datasets.Value("string"),
        "start_lineno": datasets.Value("int64"),
        "type": datasets.Value("string"),
    }),
    "relevant_files": datasets.List(datasets.Value("string")),
    "num_non_test_files": datasets.Value("int64"),
    "num_non_test_func_methods": datasets.Value("int64"),
    "num_non_test_lines": datasets.Value("int64"),
    "prompt": datasets.Value("string"),
    "problem_statement": datasets.Value("string"),
    "expected_output_json": datasets.Value("string"),
})
VERIFIED_COLUMNS = ("repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
                    "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit",
                    "difficulty")
VERIFIED_FEATURES = datasets.Features({c: datasets.Value("string") for c in VERIFIED_COLUMNS})

OLD_CORE = "def add(a, b):\n    return a - b\n\n\ndef unchanged():\n    return 1\n"
NEW_CORE = "def add(a, b):\n    return a + b\n\n\ndef unchanged():\n    return 1\n"
OLD_UTIL = "VALUE = 1\nNAME = 'x'"  # no trailing newline on purpose
NEW_UTIL = "VALUE = 2\nNAME = 'x'"
NEW_FILE = "def helper():\n    return 'new'\n"


def file_diff(path: str, old: str, new: str) -> dict[str, Any]:
    """A ParsedCommit FileDiff as R2E-Gym serialises it (header.file.path, old/new contents, hunks)."""
    return {
        "old_file_content": old,
        "new_file_content": new,
        "header": {"file": {"path": path}, "misc_line": None},
        "index_line": {"old_commit_hash": "1111111", "new_commit_hash": "2222222", "mode": "100644"},
        "is_binary_file": False,
        "binary_line": None,
        "minus_file": {"path": f"a/{path}"},
        "plus_file": {"path": f"b/{path}"},
        "hunks": [],
    }


def r2e_row(commit: str = "c0ffee00112233445566778899aabbccddeeff00", repo: str = "mylib", **overrides: Any
            ) -> dict[str, Any]:
    """A well-formed R2E-Gym-Lite row; ``overrides`` replace columns (to make malformed rows)."""
    parsed = {
        "file_diffs": [
            file_diff("mylib/core.py", OLD_CORE, NEW_CORE),
            file_diff("mylib/util.py", OLD_UTIL, NEW_UTIL),
            file_diff("mylib/extra.py", "", NEW_FILE),
            file_diff("tests/test_core.py", "def test_a():\n    pass\n", "def test_a():\n    assert True\n"),
            file_diff("mylib/core_test.py", "x = 1\n", "x = 2\n"),
            file_diff("docs/changes.rst", "old\n", "new\n"),
        ],
        "old_commit_hash": "0123456789abcdef0123456789abcdef01234567",
        "new_commit_hash": commit,
        "commit_message": "Fix add",
        "commit_date": "2024-01-01T00:00:00",
        "metadata": {},
    }
    execution = {
        "repo_name": repo,
        "new_commit_hash": commit,
        "test_file_codes": ["from mylib.core import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"],
        "test_file_names": ["test_1.py"],
        "setup_res_code": 0, "setup_res_stdout": "", "setup_res_stderr": "",
        "new_commit_res_code": 0, "new_commit_res_stdout": "1 passed", "new_commit_res_stderr": "",
        "old_commit_res_code": 1, "old_commit_res_stdout": "1 failed", "old_commit_res_stderr": "",
    }
    row = {
        "repo_name": repo,
        "docker_image": f"namanjain12/{repo}_final:{commit}",
        "commit_hash": commit,
        "parsed_commit_content": json.dumps(parsed),
        "execution_result_content": json.dumps(execution),
        "modified_files": ["mylib/core.py", "mylib/util.py", "mylib/extra.py", "tests/test_core.py"],
        "modified_entity_summaries": [{"ast_type_str": "FunctionDef", "end_lineno": 2, "file_name": "mylib/core.py",
                                       "name": "add", "start_lineno": 1, "type": "function"}],
        "relevant_files": ["mylib/core.py"],
        "num_non_test_files": 3,
        "num_non_test_func_methods": 1,
        "num_non_test_lines": 4,
        "prompt": "synthesise an issue for commit ...",
        "problem_statement": f"[ISSUE]\nadd() subtracts in {repo} {commit[:6]}\n\nCalling add(1, 2) gives -1.\n[/ISSUE]",
        "expected_output_json": json.dumps({"test_add": "PASSED"}),
    }
    row.update(overrides)
    return row


def verified_row(instance_id: str = "django__django-11099", **overrides: Any) -> dict[str, Any]:
    """A well-formed SWE-bench Verified row (every column a string; F2P/P2P JSON-encoded)."""
    repo = instance_id.rsplit("-", 1)[0].replace("__", "/")
    row = {
        "repo": repo,
        "instance_id": instance_id,
        "base_commit": "d26b2424437dabeeca94d7900b37d2df4410da0c",
        "patch": "diff --git a/src/mod.py b/src/mod.py\n--- a/src/mod.py\n+++ b/src/mod.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n",
        "test_patch": ("diff --git a/tests/test_mod.py b/tests/test_mod.py\n--- a/tests/test_mod.py\n"
                       "+++ b/tests/test_mod.py\n@@ -1 +1,2 @@\n x = 1\n+y = 2\n"
                       "diff --git a/tests/other/test_b.py b/tests/other/test_b.py\n"),
        "problem_statement": f"UsernameValidator allows trailing newline ({instance_id})\nDetails follow.",
        "hints_text": "HINT-TEXT-SECRET",
        "created_at": "2019-03-20T03:46:18Z",
        "version": "3.0",
        "FAIL_TO_PASS": json.dumps(["tests/test_mod.py::test_f2p_secret"]),
        "PASS_TO_PASS": json.dumps(["tests/test_mod.py::test_p2p_keep"]),
        "environment_setup_commit": "419a78300f7cd27611196e1e464d50fd0385ff27",
        "difficulty": "<15 min fix",
    }
    row.update(overrides)
    return row


def r2e_dataset(rows: list[dict[str, Any]]) -> datasets.Dataset:
    return datasets.Dataset.from_list(rows, features=R2E_FEATURES)


def verified_dataset(rows: list[dict[str, Any]]) -> datasets.Dataset:
    return datasets.Dataset.from_list(rows, features=VERIFIED_FEATURES)


def r2e_rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [r2e_row(commit=f"{i:010x}" + "a" * 30) for i in range(start, start + n)]


def write_r2e_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    r2e_dataset(rows).to_parquet(str(path))
    return path


def write_verified_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    verified_dataset(rows).to_json(str(path), lines=True)
    return path
