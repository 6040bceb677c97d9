"""SWE-bench-shaped rows (Verified, Lite, SWE-Gym, swebench>=5 rows) -> TaskRecord.

FAIL_TO_PASS / PASS_TO_PASS come as JSON strings (Verified) or lists (SWE-Gym, SWE-smith); both are accepted.
The prebuilt image name follows the harness (``__`` -> ``_1776_``) unless the row names its own image.
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Mapping
from typing import Any

from graph_planner.data.record import TaskRecord, swebench_image_name
from graph_planner.data.sources.base import RowRejected, build_record, optional_text, require_text

SOURCE = "swebench"
TEST_CMD = "python -m pytest -rA"
COLUMNS = {
    "task_id": "instance_id",
    "fail_to_pass": "FAIL_TO_PASS",
    "pass_to_pass": "PASS_TO_PASS",
    "gold_patch": "patch",
    "image": "image",
}
#: Kept in metadata: useful for reports and the official harness, never shown to the agent.
_METADATA_COLUMNS = ("version", "environment_setup_commit", "difficulty", "hints_text", "created_at", "eval_script",
                     "eval_type")
_DIFF_GIT = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)


def patch_files(patch: str) -> list[str]:
    """Files a unified diff touches (the ``b/`` side of each ``diff --git`` line), in order, unique."""
    seen: dict[str, None] = {}
    for _, new_path in _DIFF_GIT.findall(patch):
        seen.setdefault(new_path, None)
    return list(seen)


@functools.lru_cache(maxsize=1)
def _repo_parsers() -> dict[str, str]:
    """owner/repo -> short swebench parser name (``django``, ``sympy``...), from the harness's own table."""
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY

    return {repo: fn.__name__.removeprefix("parse_log_") for repo, fn in MAP_REPO_TO_PARSER_PY.items()}


def log_parser_for(row: Mapping[str, Any], repo: str) -> str:
    """The row's own ``log_parser`` (swebench>=5 rows) else the harness's parser for the repo, else pytest."""
    named = optional_text(row, "log_parser")
    if named:
        return named.removeprefix("parse_log_")
    return _repo_parsers().get(repo, "pytest")


def normalize_swebench_row(
    row: Mapping[str, Any], split: str, max_steps: int, extra_metadata: Mapping[str, Any] | None = None
) -> TaskRecord:
    """One SWE-bench row -> TaskRecord, or RowRejected naming the column at fault."""
    instance_id = require_text(row, "instance_id").strip()
    repo = require_text(row, "repo", instance_id).strip()
    base_commit = require_text(row, "base_commit", instance_id).strip()
    statement = require_text(row, "problem_statement", instance_id).strip()
    gold_patch = require_text(row, "patch", instance_id)
    test_patch = optional_text(row, "test_patch")
    for column in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        if column not in row:
            raise RowRejected(f"missing column {column}", instance_id)
    image = optional_text(row, "image") or optional_text(row, "docker_image") or swebench_image_name(instance_id)
    metadata: dict[str, Any] = dict(extra_metadata or {})
    for column in _METADATA_COLUMNS:
        value = row.get(column)
        if isinstance(value, (datetime.date, datetime.time)):  # pyarrow's JSON reader infers created_at
            value = value.isoformat()
        if isinstance(value, str) and value.strip():
            metadata[column] = value
    record = build_record(
        {
            "task_id": instance_id,
            "source": SOURCE,
            "split": split,
            "repo": repo,
            "base_commit": base_commit,
            "problem_statement": statement,
            "title": statement.splitlines()[0].strip(),
            "max_steps": max_steps,
            "image": image.strip(),
            "workdir": "/testbed",
            "test_cmd": TEST_CMD,
            "test_files": patch_files(test_patch or ""),
            "fail_to_pass": row["FAIL_TO_PASS"],
            "pass_to_pass": row["PASS_TO_PASS"],
            "log_parser": log_parser_for(row, repo),
            "gold_patch": gold_patch,
            "test_patch": test_patch,
            "metadata": metadata,
        },
        COLUMNS,
    )
    if not record.fail_to_pass:
        raise RowRejected("FAIL_TO_PASS: empty (the task could never fail, so it cannot be graded)", instance_id)
    return record
