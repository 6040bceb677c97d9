"""Resumable evaluation: run an episode function over tasks with N concurrent sandboxes, stream results to disk.

The run directory holds results.jsonl (appended per finished task), predictions.jsonl (SWE-bench harness format)
and the report. Starting again on the same run directory skips finished tasks, so a killed run loses nothing and
duplicates nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from graph_planner.config.run_lock import run_lock
from graph_planner.data.record import TaskRecord
from graph_planner.disk import find_disk_error
from graph_planner.eval.ray_faults import ClusterLost
from graph_planner.eval.report import diagnostic_model_name, write_report
from graph_planner.eval.results import ResultsStore, TaskResult, write_predictions
from graph_planner.termination import leave_pool, signalled

log = logging.getLogger(__name__)
EpisodeFn = Callable[[TaskRecord], TaskResult]


@dataclass
class EvalOutcome:
    run_dir: Path
    summary: dict[str, Any]
    ran: int
    skipped: int
    results: list[TaskResult] = field(default_factory=list)

    @property
    def report_path(self) -> Path:
        return self.run_dir / "report.md"


def safe_episode(episode_fn: EpisodeFn, task: TaskRecord) -> TaskResult:
    """Run one episode; an exception becomes an `error` row naming the task instead of killing the run."""
    start = time.monotonic()
    try:
        return episode_fn(task)
    except Exception as exc:
        if find_disk_error(exc):
            raise  # a full / read-only disk fails every later task too: the run stops (gp: exit 5, resumable)
        category = "sandbox_error" if is_sandbox_failure(exc) else "agent_error"
        if signalled():  # the exit cleanup removed its sandbox under it: not a failure to report
            raise
        log.exception("task %s failed", task.task_id)
        return TaskResult(instance_id=task.task_id, status="error", category=category,
                          error=f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - start)


def is_sandbox_failure(exc: BaseException) -> bool:
    """The sandbox or its engine failed (not the agent): SandboxError, or a Docker / HTTP-to-engine error that
    escaped a backend (dockerd gone mid-run shows up as requests.ConnectionError)."""
    from graph_planner.sandbox.base import SandboxError

    kinds: tuple[type[BaseException], ...] = (SandboxError, ConnectionError)
    try:
        import docker.errors
        import requests

        kinds += (docker.errors.DockerException, requests.RequestException)
    except ImportError:  # pragma: no cover - docker is a core dependency
        pass
    return isinstance(exc, kinds)


def iter_local(tasks: list[TaskRecord], episode_fn: EpisodeFn, concurrency: int) -> Iterator[TaskResult]:
    """Threads, one sandbox each; at most ``concurrency`` episodes in flight; yields in completion order."""
    with leave_pool(ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="episode")) as pool:
        pending: set[Future[TaskResult]] = set()
        queue = list(tasks)
        while queue or pending:
            while queue and len(pending) < concurrency:
                pending.add(pool.submit(safe_episode, episode_fn, queue.pop(0)))
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()


@dataclass
class Tally:
    """A run's running counts, each task once: a resumed run starts from the tasks already graded (their error rows
    are played again, so they are not counted twice), and a rate is over graded tasks with errors beside it."""

    graded: int = 0
    resolved: int = 0
    tampered: int = 0
    errors: int = 0

    @property
    def done(self) -> int:
        """Tasks with a row: graded or errored."""
        return self.graded + self.errors

    def add(self, result: TaskResult) -> None:
        if result.status == "finished":
            self.graded += 1
            self.resolved += int(result.resolved)
            self.tampered += int(result.tampered)
        else:
            self.errors += 1

    def fields(self) -> dict[str, Any]:
        """The progress bar's text fields."""
        return {"resolved": self.resolved, "graded": self.graded,
                "rate": f"{self.resolved / self.graded:.0%}" if self.graded else "-",
                "errors": f", {self.errors} errored" if self.errors else ""}


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("[bold]eval[/bold]"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("resolved {task.fields[resolved]}/{task.fields[graded]} ({task.fields[rate]})"
                               "{task.fields[errors]}"),
                    TimeElapsedColumn(), console=console, transient=False)


def run_evaluation(
    tasks: list[TaskRecord],
    run_dir: Path,
    results_iter: Callable[[list[TaskRecord]], Iterable[TaskResult]],
    model_name: str,
    run_name: str,
    baselines: Callable[[list[TaskRecord]], Iterable[TaskResult]] | None = None,
    harness: Callable[[Path], dict[str, Any] | None] | None = None,
    console: Console | None = None,
    on_result: Callable[[TaskResult, int, int], None] | None = None,
    tally: Tally | None = None,
) -> EvalOutcome:
    """Evaluate the not-yet-finished tasks and (re)write predictions and report.

    ``results_iter`` runs episodes (local threads or Ray tasks) and yields TaskResults as they finish;
    ``baselines`` optionally yields labelled gold/empty rows; ``harness`` optionally grades predictions.jsonl
    with the official swebench harness and returns its numbers (None when it cannot run). ``on_result`` gets each
    row with the number of tasks done (each task once, resumed ones included) and the total; ``tally`` (filled
    here) holds the running counts. A lost Ray cluster (ClusterLost) leaves the report of what finished.
    """
    console = console or Console(stderr=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    with run_lock(run_dir):
        return _run_locked(tasks, run_dir, results_iter, model_name, run_name, baselines, harness, console,
                           on_result, Tally() if tally is None else tally)


def _run_locked(tasks: list[TaskRecord], run_dir: Path,
                results_iter: Callable[[list[TaskRecord]], Iterable[TaskResult]], model_name: str, run_name: str,
                baselines: Callable[[list[TaskRecord]], Iterable[TaskResult]] | None,
                harness: Callable[[Path], dict[str, Any] | None] | None, console: Console,
                on_result: Callable[[TaskResult, int, int], None] | None, tally: Tally) -> EvalOutcome:
    store = ResultsStore(run_dir / "results.jsonl")
    finished = store.finished_ids()
    todo = [t for t in tasks if t.task_id not in finished]
    skipped = len(tasks) - len(todo)
    if skipped:
        console.print(f"resuming {run_dir}: {skipped} task(s) already finished, {len(todo)} to go")
    for row in store.load("policy"):
        if row.status == "finished" and row.instance_id in finished and row.instance_id in {t.task_id for t in tasks}:
            tally.add(row)
    ran = 0
    with _progress(console) as progress:
        bar = progress.add_task("eval", total=len(tasks), completed=tally.done, **tally.fields())
        try:
            for result in results_iter(todo):
                store.append(result)
                ran += 1
                tally.add(result)
                progress.update(bar, completed=tally.done, **tally.fields())
                if on_result is not None:
                    on_result(result, tally.done, len(tasks))
        except ClusterLost as lost:
            rows = [r for r in store.load() if r.instance_id in {t.task_id for t in tasks}]
            write_predictions(run_dir / "predictions.jsonl", rows, diagnostic_model_name(model_name, rows))
            write_report(run_dir, rows, len(tasks), run_name)
            lost.report = run_dir / "report.json"
            lost.graded, lost.total = tally.graded, len(tasks)
            raise
    if baselines is not None:
        have = {(r.label, r.instance_id) for r in store.load()}
        for row in baselines([t for t in tasks]):
            if (row.label, row.instance_id) not in have:
                store.append(row)
    all_rows = [r for r in store.load() if r.instance_id in {t.task_id for t in tasks}]
    write_predictions(run_dir / "predictions.jsonl", all_rows, diagnostic_model_name(model_name, all_rows))
    harness_numbers = harness(run_dir / "predictions.jsonl") if harness is not None else None
    summary = write_report(run_dir, all_rows, len(tasks), run_name, harness_numbers)
    return EvalOutcome(run_dir=run_dir, summary=summary, ran=ran, skipped=skipped, results=all_rows)
