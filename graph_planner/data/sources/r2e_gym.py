"""R2E-Gym native rows (Lite / Subset / V1) -> TaskRecord.

These rows have no instance_id and no FAIL_TO_PASS: the grade is the hidden tests' status map
(``expected_output_json``), the hidden tests' sources sit in ``execution_result_content`` and the gold patch
is rebuilt from the file contents in ``parsed_commit_content`` (non-test Python files only, as R2E-Gym does).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from graph_planner.data.record import TaskRecord
from graph_planner.data.sources.base import RowRejected, build_record, optional_text, require_text

SOURCE = "r2e_gym"
TEST_CMD = "python -m pytest -rA r2e_tests"
#: TaskRecord field -> R2E column, so rejection reasons name the column a user can look at.
COLUMNS = {
    "repo": "repo_name",
    "image": "docker_image",
    "problem_statement": "problem_statement",
    "expected_output": "expected_output_json",
    "hidden_tests": "execution_result_content",
    "gold_patch": "parsed_commit_content",
    "base_commit": "parsed_commit_content",
}
_ISSUE_TAG = re.compile(r"\[/?ISSUE\]")
_TEST_DIRS = {"test", "tests", "Test", "Tests"}
_METADATA_COLUMNS = ("modified_files", "relevant_files", "num_non_test_files", "num_non_test_func_methods",
                     "num_non_test_lines")


def r2e_task_id(repo_name: str, commit_hash: str) -> str:
    """R2E rows have no id: ``<repo>__<repo>-<commit[:10]>`` (SWE-bench-like, stable across runs)."""
    return f"{repo_name}__{repo_name}-{commit_hash[:10]}"


def is_test_path(path: str) -> bool:
    """R2E-Gym's FileDiff.is_test_file rule: a test dir component, a ``test_`` file or ``*_test.py``."""
    parts = path.split("/")
    return path.endswith("_test.py") or parts[-1].startswith("test_") or any(p in _TEST_DIRS for p in parts[:-1])


def strip_issue_tags(text: str) -> str:
    return _ISSUE_TAG.sub("", text).strip()


def normalize_r2e_row(row: Mapping[str, Any], split: str, max_steps: int, extra_metadata: Mapping[str, Any] | None
                      = None) -> TaskRecord:
    """One R2E row -> TaskRecord, or RowRejected naming the column at fault."""
    repo_name = require_text(row, "repo_name").strip()
    commit_hash = require_text(row, "commit_hash").strip()
    task_id = r2e_task_id(repo_name, commit_hash)
    image = require_text(row, "docker_image", task_id).strip()
    statement = strip_issue_tags(require_text(row, "problem_statement", task_id))
    if not statement:
        raise RowRejected("problem_statement: empty once [ISSUE] tags are removed", task_id)
    expected = _expected_output(row, task_id)
    hidden_tests = _hidden_tests(row, task_id)
    commit = _json_object(row, "parsed_commit_content", task_id)
    file_diffs = commit.get("file_diffs")
    if not isinstance(file_diffs, list):
        raise RowRejected("parsed_commit_content: file_diffs is not a list", task_id)
    gold_patch = gold_patch_from_file_diffs(file_diffs, task_id)
    if not gold_patch:
        raise RowRejected("parsed_commit_content: no non-test Python file changes (the gold patch is empty)", task_id)
    base_commit = commit.get("old_commit_hash")
    metadata: dict[str, Any] = {"commit_hash": commit_hash, **(extra_metadata or {})}
    for column in _METADATA_COLUMNS:
        if row.get(column) is not None:
            metadata[column] = row[column]
    return build_record(
        {
            "task_id": task_id,
            "source": SOURCE,
            "split": split,
            "repo": repo_name,
            "base_commit": base_commit if isinstance(base_commit, str) and base_commit else None,
            "problem_statement": statement,
            "title": statement.splitlines()[0].strip(),
            "max_steps": max_steps,
            "image": image,
            "workdir": "/testbed",
            "test_cmd": TEST_CMD,
            "test_files": ["r2e_tests"],
            "log_parser": "pytest",
            "expected_output": expected,
            "hidden_tests": hidden_tests,
            "gold_patch": gold_patch,
            "metadata": metadata,
        },
        COLUMNS,
    )


def _json_object(row: Mapping[str, Any], column: str, task_id: str) -> dict[str, Any]:
    text = require_text(row, column, task_id)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RowRejected(f"{column}: not valid JSON ({exc.msg} at char {exc.pos})", task_id) from None
    if not isinstance(value, dict):
        raise RowRejected(f"{column}: expected a JSON object, got {type(value).__name__}", task_id)
    return value


def _expected_output(row: Mapping[str, Any], task_id: str) -> dict[str, str]:
    expected = _json_object(row, "expected_output_json", task_id)
    if not expected:
        raise RowRejected("expected_output_json: empty test -> status map (nothing to grade)", task_id)
    bad = [name for name, status in expected.items() if not isinstance(status, str)]
    if bad:
        raise RowRejected(f"expected_output_json: status of {bad[0]!r} is not a string", task_id)
    return expected


def _hidden_tests(row: Mapping[str, Any], task_id: str) -> dict[str, str]:
    result = _json_object(row, "execution_result_content", task_id)
    names = result.get("test_file_names") or []
    codes = result.get("test_file_codes") or []
    if not isinstance(names, list) or not isinstance(codes, list) or len(names) != len(codes):
        raise RowRejected("execution_result_content: test_file_names and test_file_codes do not pair up", task_id)
    if not all(isinstance(n, str) and n for n in names) or not all(isinstance(c, str) for c in codes):
        raise RowRejected("execution_result_content: test file names/codes must be strings", task_id)
    return dict(zip(names, codes))


def gold_patch_from_file_diffs(file_diffs: list[Any], task_id: str | None = None) -> str:
    """A git-style unified diff of the non-test Python files, from each FileDiff's old/new contents."""
    chunks = []
    for index, file_diff in enumerate(file_diffs):
        if not isinstance(file_diff, dict):
            raise RowRejected(f"parsed_commit_content: file_diffs[{index}] is not an object", task_id)
        path = _file_diff_path(file_diff)
        if not path:
            raise RowRejected(f"parsed_commit_content: file_diffs[{index}] has no header.file.path", task_id)
        if not path.endswith(".py") or is_test_path(path) or file_diff.get("is_binary_file"):
            continue
        old, new = file_diff.get("old_file_content"), file_diff.get("new_file_content")
        if not isinstance(old, str) or not isinstance(new, str):
            raise RowRejected(f"parsed_commit_content: {path}: old/new_file_content missing", task_id)
        chunks.append(unified_file_diff(path, old, new))
    return "".join(chunks)


def _file_diff_path(file_diff: Mapping[str, Any]) -> str | None:
    header = file_diff.get("header")
    if isinstance(header, dict) and isinstance(header.get("file"), dict):
        return optional_text(header["file"], "path")
    return None


def unified_file_diff(path: str, old: str, new: str) -> str:
    """``diff --git`` section for one file; handles created/deleted files and a missing final newline."""
    created, deleted = old in ("", "/dev/null"), new == "/dev/null"
    old = "" if created else old
    new = "" if deleted else new
    if old == new:
        return ""
    out = [f"diff --git a/{path} b/{path}\n"]
    if created:
        out.append("new file mode 100644\n")
    elif deleted:
        out.append("deleted file mode 100644\n")
    # difflib is quadratic-ish on whole files; R2E rows carry whole files with a few changed lines, so diff only
    # the span between the common head and tail (keeping the context lines) and shift the hunk line numbers.
    offset, old_mid, new_mid = _changed_region(old, new, _CONTEXT)
    body = difflib.unified_diff(
        _lines(old_mid), _lines(new_mid),
        "/dev/null" if created else f"a/{path}", "/dev/null" if deleted else f"b/{path}", n=_CONTEXT,
    )
    for line in body:
        if line.startswith(("---", "+++")):
            out.append(line if line.endswith("\n") else line + "\n")
        elif line.startswith("@@"):
            out.append(_shift_hunk_header(line, offset))
        elif line.endswith("\n"):
            out.append(line)
        else:  # last line of a file without a trailing newline
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


_CONTEXT = 3
_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def _lines(text: str) -> list[str]:
    """Lines with their ``\n`` (only ``\n`` ends a line, as for git; str.splitlines also splits on \f, \r...)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _changed_region(old: str, new: str, context: int) -> tuple[int, str, str]:
    """(first line number, old part, new part): the texts minus their common head and tail lines, keeping
    ``context`` lines each side. Found with string compares (C speed), not line by line."""
    limit = min(len(old), len(new))
    head_chars = _longest(lambda k: old[:k] == new[:k], limit)
    tail_chars = _longest(lambda k: old[len(old) - k:] == new[len(new) - k:], limit - head_chars)
    start = old.rfind("\n", 0, head_chars) + 1  # first line that differs (same offset in both texts)
    for _ in range(context):
        if start == 0:
            break
        start = old.rfind("\n", 0, start - 1) + 1
    old_end = len(old) - tail_chars  # common tail, from its first whole line, plus context lines
    if not all(end == 0 or text[end - 1] == "\n" for text, end in ((old, old_end), (new, len(new) - tail_chars))):
        old_end = _next_line(old, old_end)
    for _ in range(context):
        old_end = _next_line(old, old_end)
    new_end = len(new) - (len(old) - old_end)
    return old.count("\n", 0, start), old[start:old_end], new[start:new_end]


def _next_line(text: str, position: int) -> int:
    cut = text.find("\n", position)
    return len(text) if cut < 0 else cut + 1


def _longest(matches: Callable[[int], bool], limit: int) -> int:
    """Largest k <= limit with matches(k), for a monotone predicate; binary search keeps the slice compares in C."""
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        if matches(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _shift_hunk_header(line: str, offset: int) -> str:
    """Add ``offset`` to both start lines of a ``@@ -a,b +c,d @@`` header (difflib saw sliced files)."""
    if not offset:
        return line
    match = _HUNK.match(line)
    assert match is not None, line
    old_start, old_len, new_start, new_len = match.groups()
    shifted = f"@@ -{int(old_start) + offset}{old_len or ''} +{int(new_start) + offset}{new_len or ''} @@"
    return shifted + line[match.end():]
