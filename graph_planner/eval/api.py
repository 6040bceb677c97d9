"""`evaluate_dataset`: the eval stage as one plain function (used by `gp eval` and the Prefect evaluate task)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console

from graph_planner.config.paths import run_paths
from graph_planner.config.run_lock import run_lock
from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.eval.results import TaskResult
from graph_planner.eval.runner import EvalOutcome, Tally, iter_local, run_evaluation

log = logging.getLogger(__name__)


#: An eval's own directory inside the run dir (results, predictions, report, its run lock).
EVAL_SUBDIR = "eval"


def eval_run_dir(config: RunConfig) -> Path:
    return run_paths(config).run_dir / EVAL_SUBDIR


def load_eval_tasks(dataset: str | Path, limit: int | None = None,
                    split: str | None = None) -> tuple[list[TaskRecord], Path]:
    """Tasks of a TaskRecord JSONL, or of one split of a prepared source dir (``<dir>/<split>.jsonl``, seed 000's
    ``--dataset datasets/swebench --dataset-split validation``); the dataset dir anchors relative repo paths."""
    from graph_planner.data.io import NON_SPLIT_FILES, read_task_records

    path = Path(dataset)
    if not path.exists():
        raise FileNotFoundError(f"eval dataset not found: {path} (run `gp data prepare` or pass --dataset)")
    splits = sorted(p.stem for p in path.glob("*.jsonl") if p.name not in NON_SPLIT_FILES) if path.is_dir() else []
    if split is not None and splits:
        if split not in splits:
            raise FileNotFoundError(f"{path} has no split {split!r} (eval.split / --dataset-split); its splits: "
                                    f"{splits}")
        tasks = read_task_records(path / f"{split}.jsonl")
    else:
        tasks = read_task_records(path)
    if limit is not None:
        tasks = tasks[:limit]
    return tasks, (path if path.is_dir() else path.parent)


def _reap_dead_runs(config: RunConfig, tasks: list[TaskRecord]) -> None:
    """Containers left by a killed earlier run (docker backend) are removed before we start again."""
    from graph_planner.sandbox.factory import backend_for

    if not any(backend_for(t, config) == "docker" for t in tasks):
        return
    try:
        import docker

        from graph_planner.sandbox.reaper import reap

        removed = reap(docker.from_env(), dead_owners=True)
        if removed:
            log.info("reaped %d container(s) of dead runs", len(removed))
    except Exception as exc:  # noqa: BLE001 - reaping is housekeeping; the episodes will report a dead engine
        log.warning("could not reap containers of dead runs: %s", exc)


def baseline_rows(config: RunConfig, dataset_dir: Path) -> Callable[[list[TaskRecord]], Iterator[TaskResult]]:
    """Labelled bounds: the gold patch (upper) and the empty patch (lower), graded in the same sandboxes."""
    from graph_planner.validation.validate import validate_task

    def rows(tasks: list[TaskRecord]) -> Iterator[TaskResult]:
        for task in tasks:
            check = validate_task(task, config, dataset_dir)
            for label, outcome, patch in (("baseline:gold", check.gold, task.gold_patch or ""),
                                          ("baseline:empty", check.empty, "")):
                resolved = bool(outcome and outcome.resolved)
                yield TaskResult(instance_id=task.task_id, label=label, resolved=resolved,
                                 tampered=bool(outcome and outcome.tampered),
                                 tamper_evidence=list(outcome.tamper_evidence) if outcome else [],
                                 category="resolved" if resolved else ("no_patch" if not patch else "unresolved"),
                                 model_patch=patch, seconds=outcome.seconds if outcome else 0.0,
                                 status="finished" if outcome else "error", error=check.error if not outcome else None,
                                 tests={"statuses": outcome.statuses} if outcome else {})

    return rows


def official_harness(config: RunConfig, tasks: list[TaskRecord], run_dir: Path,
                     run_id: str) -> Callable[[Path], dict[str, Any] | None]:
    """eval.use_swebench_harness: grade predictions.jsonl again with the official swebench harness (one container
    per task, eval.batch_size at once, sandbox.test_timeout per task) when the tasks' images are present."""
    from graph_planner.eval.harness import run_swebench_harness

    def grade(predictions: Path) -> dict[str, Any] | None:
        return run_swebench_harness(tasks, predictions, run_dir, run_id, max_workers=config.eval.batch_size,
                                    timeout=int(config.sandbox.test_timeout))

    return grade


#: Synthesisers whose patches come from the gold patch: every row of such a run says so (reports, predictions).
DIAGNOSTIC_SYNTHESIZERS = ("gold", "oracle")


def labelled_diagnostic(results_iter: Callable[[list[TaskRecord]], Iterable[TaskResult]],
                        synthesizer: str) -> Callable[[list[TaskRecord]], Iterable[TaskResult]]:
    """With a diagnostic synthesiser configured, every row carries ``info.diagnostic`` even when no repair ran in
    its episode, so report.md/report.json/predictions.jsonl of the run are labelled whatever happened."""
    if synthesizer not in DIAGNOSTIC_SYNTHESIZERS:
        return results_iter

    def labelled(todo: list[TaskRecord]) -> Iterator[TaskResult]:
        for row in results_iter(todo):
            row.info["diagnostic"] = row.info.get("diagnostic") or synthesizer
            yield row

    return labelled


def evaluate_dataset(config: RunConfig, dataset: str | Path | None = None, console: Console | None = None,
                     on_result: Callable[[TaskResult, int, int], None] | None = None,
                     run_dir: str | Path | None = None) -> EvalOutcome:
    """Run the configured policy over a prepared split; resumable on the same run dir.

    `run_dir`: where predictions, results and the report go (default `<run dir>/eval`); the Prefect task gives
    each cache key its own directory."""
    from graph_planner.eval.episode import build_episode_fn

    dataset = dataset or config.paths.dataset_eval
    if not dataset:
        raise ValueError("no eval dataset: set paths.dataset_eval or pass --dataset")
    tasks, dataset_dir = load_eval_tasks(dataset, config.eval.limit, config.eval.split)
    run_dir = Path(run_dir) if run_dir is not None else eval_run_dir(config)
    run_id = f"eval-{config.run_name}-{uuid.uuid4().hex[:6]}"
    _reap_dead_runs(config, tasks)
    if config.eval.executor == "ray":
        from graph_planner.eval.ray_executor import iter_ray

        def results_iter(todo: list[TaskRecord]) -> Iterable[TaskResult]:
            return iter_ray(todo, config, str(dataset_dir), run_id, eval_dir=run_dir)
    else:
        episode_fn = build_episode_fn(config, dataset_dir, run_id, trajectories_dir=run_dir / "trajectories",
                                      eval_dir=run_dir)

        def results_iter(todo: list[TaskRecord]) -> Iterable[TaskResult]:
            return iter_local(todo, episode_fn, config.eval.batch_size)

    results_iter = labelled_diagnostic(results_iter, config.backends.cgm_backend)
    from graph_planner.eval.tracking import publish_eval
    from graph_planner.telemetry.session import run_telemetry

    started = time.monotonic()
    # the run lock before telemetry opens: a run refused by it appends no metrics and writes no event file
    with run_lock(run_dir), run_telemetry(config, run_dir, job_type="eval") as tracker:
        tally = Tally()
        ran = 0

        def track(result: TaskResult, done: int, total: int) -> None:
            # step = tasks done (each task once, 1..total; a resume re-logs only the steps of the tasks it plays),
            # so the summary logged at total + 1 never shares a step with a task's metrics
            nonlocal ran
            ran += 1
            minutes = max(time.monotonic() - started, 1e-6) / 60
            graded = max(tally.graded, 1)
            metrics = {"eval/completed": done, "eval/graded": tally.graded, "eval/errors": tally.errors,
                       "eval/resolved": tally.resolved, "eval/resolved_rate_run": tally.resolved / graded,
                       "grading/tampered_rate": tally.tampered / graded, "episodes_per_min": ran / minutes}
            if result.status == "finished":  # an error row played no episode: no steps to average in
                metrics["eval/steps"] = result.steps
            tracker(metrics, done)
            if on_result is not None:
                on_result(result, done, total)

        outcome = run_evaluation(
            tasks, run_dir, results_iter,
            model_name=config.eval.model_name or config.run_name,
            run_name=config.run_name,
            baselines=baseline_rows(config, dataset_dir) if config.eval.baselines else None,
            harness=official_harness(config, tasks, run_dir, run_id) if config.eval.use_swebench_harness else None,
            console=console,
            on_result=track,
            tally=tally,
        )
        publish_eval(tracker, outcome, len(tasks) + 1)
    return outcome
