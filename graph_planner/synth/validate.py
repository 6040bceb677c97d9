"""Validate candidate bugs by running the repository's tests in the project's sandboxes.

The clean tree is run twice, once per repository (flaky or failing tests stop the job: no task could be trusted),
and reused for every candidate. Each worker thread owns one started sandbox of the clean tree and its pytest fork
server (runner.py): a candidate is written in, run (twice when the first run flips anything), and the file put
back (the snapshot restored when a run left anything else behind), so a candidate costs forked test runs only,
never a sandbox or Python start.
"""

from __future__ import annotations

import math
import queue
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from graph_planner.config.schema import SandboxConfig
from graph_planner.data.record import TaskRecord
from graph_planner.episode.results import TestReport
from graph_planner.sandbox.base import SandboxError
from graph_planner.sandbox.local import LocalSandbox
from graph_planner.synth.modifiers import Mutation
from graph_planner.synth.runner import ForkRunner

PASSING = ("PASSED", "XFAIL")
#: Started sandboxes of the clean tree: (sandbox, snapshot of the clean tree, its fork server).
Pool = queue.Queue[tuple[LocalSandbox, str, ForkRunner]]
FAILING = ("FAILED", "ERROR")


class SynthInputError(ValueError):
    """The repository cannot give tasks (no tests, failing or flaky tests, ...): one line for the user."""


@dataclass
class Baseline:
    passing: list[str]  # test ids that passed on both clean runs
    seconds: float  # the two clean runs together
    run_seconds: float  # one clean run (sets the candidate timeout)


@dataclass
class Verdict:
    """One candidate after validation: ``reason`` is None for a task."""

    mutation: Mutation
    reason: str | None = None
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    symptoms: dict[str, str] = field(default_factory=dict)  # failing test -> its message
    seconds: float = 0.0
    runs: int = 0


def clean_task(source: Path, repo_name: str) -> TaskRecord:
    """A task record of the unmodified tree: what the sandboxes start from."""
    return TaskRecord(task_id=f"synth-base__{repo_name}", source="custom", split="base", repo=repo_name,
                      problem_statement="(clean tree of a synthesis run)", repo_path=str(source.resolve()),
                      env={"COLUMNS": "400"})  # pytest's short summary cuts messages at the terminal width


def baseline_from(first: TestReport, second: TestReport, seconds: float, where: str) -> Baseline:
    """The clean tree's two runs as a Baseline; SynthInputError when there is nothing to build on."""
    for report in (first, second):
        if report.timed_out:
            raise SynthInputError(f"{where}: the test suite timed out on the clean tree")
        if report.tampered:
            raise SynthInputError(f"{where}: the grader's integrity checks failed on the clean tree "
                                  f"({'; '.join(report.tamper_evidence[:2])})")
    common = set(first.statuses) & set(second.statuses)
    if not common:
        detail = f" ({first.error})" if first.error else ""
        raise SynthInputError(f"{where}: no pytest test ran on the clean tree{detail}; synthesis needs a repository "
                              "with a passing pytest suite")
    flaky = sorted(t for t in common if first.statuses[t] != second.statuses[t])
    if flaky:
        raise SynthInputError(f"{where}: flaky tests (different results on two runs of the clean tree): "
                              f"{', '.join(flaky[:5])}{' ...' if len(flaky) > 5 else ''}")
    failing = sorted(t for t in common if first.statuses[t] in FAILING)
    if failing:
        raise SynthInputError(f"{where}: tests fail on the clean tree, fix them first: "
                              f"{', '.join(failing[:5])}{' ...' if len(failing) > 5 else ''}")
    passing = sorted(t for t in common if first.statuses[t] in PASSING)
    if not passing:
        raise SynthInputError(f"{where}: no test passes on the clean tree (all skipped?)")
    return Baseline(passing, seconds, max(first.seconds, second.seconds))


def pool_baseline(pool: Pool, settings: SandboxConfig) -> tuple[Baseline, dict[str, set[int]] | None, float]:
    """The clean tree's two runs (on two of the pool's sandboxes at once when it has two) and the executed-lines
    trace (coverage.py) on the first: (baseline, executed lines or None, seconds of the trace)."""
    members = [pool.get() for _ in range(min(2, pool.qsize()))]
    where = str(members[0][0].task.repo_path)
    try:
        start = time.monotonic()
        try:
            if len(members) == 2:
                with ThreadPoolExecutor(2) as ex:
                    first, second = ex.map(lambda m: _clean_run(m, settings.test_timeout), members)
            else:
                first = _clean_run(members[0], settings.test_timeout)
                second = _clean_run(members[0], settings.test_timeout)
        except SandboxError as exc:  # the fork server did not start: no pytest for the sandbox's python
            raise SynthInputError(f"{where}: {exc}") from None
        base = baseline_from(first, second, time.monotonic() - start, where)
        t0 = time.monotonic()
        box, snap, runner = members[0]
        executed = runner.executed_lines(min(settings.test_timeout, max(60.0, 20 * base.run_seconds)))
        if runner.changed:
            box.restore(snap)
        return base, executed, time.monotonic() - t0
    finally:
        for member in members:
            pool.put(member)


def _clean_run(member: tuple[LocalSandbox, str, ForkRunner], timeout: float) -> TestReport:
    box, snap, runner = member
    report = runner.run(timeout)
    if runner.changed:
        box.restore(snap)
    return report


_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - (.*))?$", re.MULTILINE)


def symptoms_of(report: TestReport, tests: Sequence[str]) -> dict[str, str]:
    """Failing test -> the message pytest's short summary gives it (assertion or exception text)."""
    messages = {m.group(2): (m.group(3) or "").strip() for m in _SUMMARY.finditer(report.log_tail)}
    return {t: messages.get(t, report.statuses.get(t, "FAILED")) for t in tests}


def judge(mutation: Mutation, base: Baseline, runs: list[TestReport]) -> Verdict:
    """Turn the mutated runs into a task (F2P / P2P) or a reason to discard."""
    verdict = Verdict(mutation, runs=len(runs), seconds=sum(r.seconds for r in runs))
    first = runs[0]
    if any(r.timed_out for r in runs):
        verdict.reason = "timeout"
        return verdict
    if any(r.tampered for r in runs):  # the grader's canaries came out wrong: no status of that run is trusted
        verdict.reason = "tampered: the test run's integrity checks failed"
        return verdict
    seen = [t for t in base.passing if t in first.statuses]
    if not seen:
        verdict.reason = "breaks collection of the whole suite"
        return verdict
    if len(seen) < len(base.passing):
        verdict.reason = "some tests are no longer collected"
        return verdict
    flipped = [t for t in base.passing if first.statuses[t] in FAILING]
    if not flipped:
        verdict.reason = "fails no test"
        return verdict
    if first.error and "timed out" in first.error:
        verdict.reason = "timeout"
        return verdict
    for other in runs[1:]:
        if any(first.statuses.get(t) != other.statuses.get(t) for t in base.passing):
            verdict.reason = "flaky: the two runs of the mutated tree differ"
            return verdict
    verdict.fail_to_pass = flipped
    verdict.pass_to_pass = [t for t in base.passing if first.statuses[t] in PASSING]
    if len(verdict.fail_to_pass) + len(verdict.pass_to_pass) != len(base.passing):
        verdict.reason = "some tests end neither passed nor failed (skipped by the mutation)"
        return verdict
    verdict.symptoms = symptoms_of(first, flipped)
    return verdict


def candidate_settings(settings: SandboxConfig, base: Baseline) -> SandboxConfig:
    """A mutated tree may loop forever: allow a few times the clean run, never more than the configured limit."""
    limit = min(settings.test_timeout, max(10.0, 5 * base.run_seconds + 5))
    return settings.model_copy(update={"test_timeout": limit})


@contextmanager
def sandbox_pool(task: TaskRecord, settings: SandboxConfig, size: int, run_id: str | None = None) -> Iterator[Pool]:
    """``size`` started sandboxes of the clean tree (with their snapshot and fork server), handed out through a
    queue; all closed on exit."""
    run_id = run_id or f"synth-{uuid.uuid4().hex[:8]}"
    pool: Pool = queue.Queue()
    with ExitStack() as stack, ThreadPoolExecutor(size) as starter:
        boxes = [LocalSandbox(task, settings, None, run_id) for _ in range(size)]
        for box in boxes:
            stack.callback(box.close)
        for box, snap in zip(boxes, starter.map(_start, boxes), strict=True):
            runner = ForkRunner(box)
            stack.callback(runner.close)
            pool.put((box, snap, runner))
        yield pool


def _left_behind(changed: list[str], mutated_path: str) -> bool:
    """``git status --porcelain`` entries other than the mutated file itself."""
    return any(entry[3:] != mutated_path for entry in changed)


def _start(box: LocalSandbox) -> str:
    box.start()
    return box.snapshot()


def validate_candidates(task: TaskRecord, settings: SandboxConfig, base: Baseline, candidates: Sequence[Mutation],
                        workers: int, limit: int | None = None,
                        on_done: Callable[[Verdict], None] | None = None,
                        pool: Pool | None = None) -> list[Verdict | None]:
    """Verdicts in candidate order (None = not judged). Candidates are judged in order, in windows of at most four
    per worker, and the job stops after the window that brings ``limit`` valid ones; near the limit a window is
    about 1.5 times the valid ones still missing (at least one per worker), so few candidates are judged for
    nothing. Window sizes depend only on earlier verdicts: which candidates are judged never depends on thread
    timing. ``pool``: started sandboxes to use (sandbox_pool; one worker per sandbox), else a pool of ``workers``
    is started here."""
    settings = candidate_settings(settings, base)
    verdicts: list[Verdict | None] = [None] * len(candidates)

    def one(mutation: Mutation) -> Verdict:
        box, snap, runner = boxes.get()
        original = box.read_file(mutation.path)
        mutated = mutation.mutated.decode("utf-8")
        try:
            box.write_file(mutation.path, mutated)
            runs = [runner.run(settings.test_timeout)]
            if any(runs[0].statuses.get(t) in FAILING for t in base.passing) and not runs[0].timed_out:
                if _left_behind(runner.changed, mutation.path):
                    box.restore(snap)
                    box.write_file(mutation.path, mutated)
                runs.append(runner.run(settings.test_timeout))
            box.write_file(mutation.path, original)
            if _left_behind(runner.changed, mutation.path):  # a test wrote into the tree: back to the clean copy
                box.restore(snap)
        except BaseException:
            box.restore(snap)
            raise
        finally:
            boxes.put((box, snap, runner))
        return judge(mutation, base, runs)

    workers = max(1, workers) if pool is None else max(1, pool.qsize())
    valid, lo = 0, 0
    with ExitStack() as stack:
        boxes = pool if pool is not None else stack.enter_context(sandbox_pool(task, settings, workers))
        ex = stack.enter_context(ThreadPoolExecutor(workers))
        while lo < len(candidates) and (limit is None or valid < limit):
            window = workers * 4 if limit is None else min(workers * 4, max(workers, math.ceil((limit - valid) * 1.5)))
            batch = list(range(lo, min(lo + window, len(candidates))))
            for i, verdict in zip(batch, ex.map(lambda i: one(candidates[i]), batch), strict=True):
                verdicts[i] = verdict
                valid += verdict.reason is None
                if on_done is not None:
                    on_done(verdict)
            lo += len(batch)
    return verdicts
