"""What of a test run the agent may see: counts for the hidden tests, details only for tests it can read itself.

A hidden test is any test in a file the test_patch touches (new hidden files *and* existing files it extends)
or in the R2E hidden tests dir. Their ids, assertion messages and tracebacks would tell the policy what the
grader checks, so `run_tests` shows "k/n of the failing tests pass" for them and nothing else; tests in files
the agent can read (PASS_TO_PASS tests in untouched files, or selectors it chose) keep their FAILED lines.
"""

from __future__ import annotations

import posixpath

from graph_planner.data.record import TaskRecord
from graph_planner.sandbox.base import PatchRejected
from graph_planner.sandbox.patching import touched_files

R2E_TESTS_DIR = "r2e_tests"
#: Error messages of a grading run that would name hidden files or print hidden test text.
_HIDDEN_ERROR_PREFIXES = ("test_patch of task", "could not copy hidden tests", "hidden test name")


def hidden_test_files(task: TaskRecord) -> set[str]:
    """Repository paths whose tests are hidden from the agent."""
    files: set[str] = set()
    if task.test_patch:
        try:
            files |= set(touched_files(task.test_patch))
        except PatchRejected:
            pass
    return files


def hidden_dirs(task: TaskRecord) -> set[str]:
    return {R2E_TESTS_DIR, posixpath.basename(task.hidden_tests_dir.rstrip("/")) or R2E_TESTS_DIR}


def is_visible_test(test_id: str, hidden_files: set[str], dirs: set[str]) -> bool:
    """True when the agent can read the file of ``test_id`` (a pytest id `path::name` or an R2E key)."""
    if "::" not in test_id:
        return False  # R2E keys and bare names come from the hidden tests
    path = test_id.split("::", 1)[0].strip()
    if path in hidden_files:
        return False
    return not any(part in dirs for part in path.split("/"))


def agent_error(error: str | None) -> str | None:
    """A grading error as the agent may see it: problems installing hidden tests are named, not printed."""
    if error is None:
        return None
    if error.startswith(_HIDDEN_ERROR_PREFIXES) or "does not apply in" in error:
        return "the hidden tests could not be installed on the current tree (the patch conflicts with them)"
    return error.splitlines()[0][:300]
