"""`mine`: real bug-fix tasks from a repository's history (R2E-Gym SWE-Gen style).

A commit that changes non-test Python code together with test files is a candidate. In a sandbox of its parent
with the commit's test changes applied (``test_patch``, installed only at grading time like SWE-bench's), the
tests run twice; with the commit's code change (the gold patch) applied, twice again (two runs that differ on
either side: flaky, discarded). FAIL_TO_PASS = tests that
fail before and pass after (both runs), PASS_TO_PASS = tests that pass throughout. The problem statement is the
commit message, flagged as such in the metadata (it may name the fix; an issue text would not).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from graph_planner.config.schema import SandboxConfig
from graph_planner.data.record import TaskRecord
from graph_planner.data.sources.base import RejectedRow
from graph_planner.sandbox.base import SandboxError
from graph_planner.sandbox.local import LocalSandbox
from graph_planner.synth.synth import check_repo
from graph_planner.synth.targets import is_test_path
from graph_planner.synth.taskrepo import git
from graph_planner.synth.validate import FAILING, PASSING, SynthInputError

SOURCE = "mined"


@dataclass
class MineStats:
    commits: int = 0
    candidates: int = 0
    mined: int = 0
    seconds: float = 0.0
    rejected: dict[str, int] = field(default_factory=dict)


def candidate_commits(repo: Path, max_commits: int) -> list[tuple[str, str, list[str], list[str]]]:
    """(commit, parent, code files, test files) of the last ``max_commits`` non-merge commits that change both."""
    out = []
    listing = git(repo, "rev-list", "--no-merges", f"--max-count={max_commits}", "--parents", "HEAD")
    for line in listing.splitlines():
        ids = line.split()
        if len(ids) != 2:
            continue  # a root commit has nothing before it
        commit, parent = ids
        names = [n for n in git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", parent, commit).split("\n")
                 if n]
        tests = [n for n in names if is_test_path(n)]
        code = [n for n in names if n.endswith(".py") and not is_test_path(n)]
        if tests and code:
            out.append((commit, parent, code, tests))
    return list(reversed(out))


def _diff(repo: Path, parent: str, commit: str, paths: list[str]) -> str:
    return git(repo, "diff-tree", "-p", "--no-color", "--no-ext-diff", "--full-index", parent, commit, "--", *paths)


def mine_repo(repo: str | Path, sandbox: SandboxConfig, max_commits: int = 200, max_steps: int = 30,
              progress: Callable[[str, int, int], None] | None = None,
              ) -> tuple[list[TaskRecord], list[RejectedRow], MineStats]:
    """Tasks of ``repo``'s fix commits (split ``test``: real fixes are held out); SynthInputError on bad input."""
    start = time.monotonic()
    repo = Path(repo).resolve()
    check_repo(repo)
    if not (repo / ".git").exists():
        raise SynthInputError(f"{repo}: not a git repository; mining needs its history")
    name = repo.name
    stats = MineStats()
    stats.commits = len([c for c in git(repo, "rev-list", f"--max-count={max_commits}", "HEAD").split() if c])
    candidates = candidate_commits(repo, max_commits)
    stats.candidates = len(candidates)
    records: list[TaskRecord] = []
    rejected: list[RejectedRow] = []
    run_id = f"mine-{uuid.uuid4().hex[:8]}"
    for index, (commit, parent, code, tests) in enumerate(candidates):
        if progress:
            progress(f"mine {name}", index, len(candidates))
        task_id = f"mined__{name}-{commit[:10]}"
        message = git(repo, "log", "-1", "--format=%B", commit).strip()
        record = TaskRecord(
            task_id=task_id, source=SOURCE, split="test", repo=name, base_commit=parent,
            problem_statement=message or "(empty commit message)", title=message.splitlines()[0] if message else "",
            max_steps=max_steps, repo_path=str(repo), gold_patch=_diff(repo, parent, commit, code),
            test_patch=_diff(repo, parent, commit, tests),
            metadata={"location": f"{name}:{commit}", "problem_statement_from": "commit message",
                      "mined": {"commit": commit, "parent": parent, "code_files": code, "test_files": tests}})
        reason, f2p, p2p = _judge(record, sandbox, run_id)
        if reason is None and not message:
            reason = "empty commit message (no problem statement)"
        if reason is not None:
            stats.rejected[reason] = stats.rejected.get(reason, 0) + 1
            rejected.append(RejectedRow(SOURCE, "test", index, task_id, f"{reason} (commit {commit[:10]})"))
            continue
        records.append(record.model_copy(update={"fail_to_pass": f2p, "pass_to_pass": p2p}))
    if progress:
        progress(f"mine {name}", len(candidates), len(candidates))
    stats.mined = len(records)
    stats.seconds = time.monotonic() - start
    return records, rejected, stats


def _judge(record: TaskRecord, sandbox: SandboxConfig, run_id: str) -> tuple[str | None, list[str], list[str]]:
    """Before (parent + new tests) and after (+ the fix) twice each: (reason to discard or None, F2P, P2P). A test
    whose two runs differ on either side makes the commit flaky (a coin-flip test that failed before and passed
    after would otherwise become FAIL_TO_PASS)."""
    try:
        with LocalSandbox(record, sandbox, None, run_id) as box:
            befores = [box.run_tests(), box.run_tests()]
            box.apply_patch(record.gold_patch or "")
            after = [box.run_tests(), box.run_tests()]
    except SandboxError as exc:
        return f"sandbox error: {exc}", [], []
    if any(r.timed_out for r in (*befores, *after)):
        return "timeout", [], []
    if befores[0].statuses != befores[1].statuses:
        return "flaky: two runs before the fix differ", [], []
    if after[0].statuses != after[1].statuses:
        return "flaky: two runs after the fix differ", [], []
    before = befores[0]
    passing_after = {t for t, s in after[0].statuses.items() if s in PASSING}
    f2p = sorted(t for t in passing_after if before.statuses.get(t, "FAILED") in FAILING
                 or t not in before.statuses)
    p2p = sorted(t for t in passing_after if before.statuses.get(t) in PASSING)
    if not f2p:
        return "no test fails before the fix and passes after it", [], []
    return None, f2p, p2p
