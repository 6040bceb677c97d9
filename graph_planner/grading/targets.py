"""Which test files a grading run must execute: the task's test files plus every file a graded test id lives in."""

from __future__ import annotations

from graph_planner.data.record import TaskRecord


def covered(path: str, targets: list[str]) -> bool:
    """True when ``path`` is one of ``targets`` or lies under a target directory."""
    return any(path == t.rstrip("/") or path.startswith(t.rstrip("/") + "/") for t in targets)


def grading_targets(task: TaskRecord) -> list[str]:
    """test_files plus the file of every FAIL_TO_PASS / PASS_TO_PASS pytest id they miss: a graded test the command
    never runs would count as failed. Empty test_files = the whole suite, left as is."""
    targets = list(task.test_files)
    if not targets:
        return targets
    for test_id in [*task.fail_to_pass, *task.pass_to_pass]:
        path = test_id.split("::", 1)[0]
        if "::" in test_id and path.endswith(".py") and not covered(path, targets):
            targets.append(path)
    return targets
