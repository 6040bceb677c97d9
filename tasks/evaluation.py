"""Evaluation step (SWE-bench style grading of the policy on the eval split) and the report artifacts.

The eval output dir is content-addressed (``<run dir>/evals/<cache key>/eval``): a different checkpoint or
dataset never resumes, and is never mistaken for, another input's results, while a crashed attempt with the
same inputs resumes where it stopped (the library skips finished tasks).
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.transactions import get_transaction

from graph_planner.config.paths import TRAINING_CURVES, run_paths
from graph_planner.config.schema import RunConfig
from graph_planner.eval.report import headline
from graph_planner.eval.results import ResultsStore, TaskResult
from graph_planner.telemetry.wandb_runs import WandbRunRecord, report_lines, wandb_runs
from tasks.artifacts import ProgressArtifact, inline_plots, run_scope, table_rows
from tasks.caching import InputFileContents, step_cache
from tasks.config import load_resolved

RESULT_COLUMNS = ["instance_id", "label", "resolved", "category", "steps", "seconds", "termination_reason", "error"]


@task(name="evaluate", persist_result=True,
      cache_policy=step_cache("eval", ("graph_planner",), InputFileContents(exclude=("config_file",))))
def evaluate_checkpoint(config_file: str, model: str | None = None) -> str:
    """Evaluate ``model`` (default ``paths.planner_model``) on ``paths.dataset_eval``; return the eval dir."""
    from graph_planner.eval.api import evaluate_dataset

    config = load_resolved(config_file)
    if model:
        config.paths.planner_model = model
    transaction = get_transaction()
    fingerprint = (transaction.key if transaction and transaction.key else "uncached")[:16]
    eval_dir = run_paths(config).evals / fingerprint / "eval"
    bar = ProgressArtifact(f"{run_scope(config.run_name)}-eval-progress", f"tasks evaluated ({config.run_name})")
    logger = get_run_logger()

    def on_result(result: TaskResult, done: int, total: int) -> None:
        bar.update(done, total, f"{done}/{total} tasks")
        logger.info("%s: %s (%s, %d steps)", result.instance_id, "resolved" if result.resolved else "unresolved",
                    result.category, result.steps)

    try:
        outcome = evaluate_dataset(config, on_result=on_result, run_dir=eval_dir)
        bar.update(1, 1)
    finally:
        bar.close()  # bounded wait for the last progress update; a down API costs a warning, not the step
    logger.info("resolved %s/%s -> %s", outcome.summary["resolved"], outcome.summary["total_tasks"],
                outcome.report_path)
    return str(outcome.run_dir)


def producing_run_dir(output: Path, default: Path) -> Path:
    """The run directory that wrote ``output`` (a checkpoint, an eval dir: the nearest parent holding a resolved
    config), else ``default``: a cached rerun of an unnamed run has a fresh directory of its own, while its
    checkpoint, curves, eval and comparison are the first run's."""
    from graph_planner.config.checkpoints import run_dir_of

    return run_dir_of(output) or default


def report_artifact_markdown(config: RunConfig, config_file: str, directory: Path, model: str | None,
                             curves: Path | None) -> str:
    """The report artifact: the headline once, a short item list (long paths would widen a table past the
    column), the plots inline, then report.md's tables. ``model`` is the checkpoint this run trained (the
    pipeline's): only then are there training details and curves to show; a plain eval trained nothing."""
    summary = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    head = headline(summary)
    lines = [f"# {config.run_name}", "", head, "",
             f"- model: `{model or config.paths.planner_model}`",
             f"- eval dataset: `{config.paths.dataset_eval}`",
             *([f"- training: {config.training.backend} backend, {config.training.total_steps} steps"]
               if model else []),
             f"- sandbox: {config.backends.sandbox_override or config.backends.sandbox}",
             *report_lines(wandb_runs_of(config, directory, model)),
             f"- report files: `{directory}` (report.md, report.json, predictions.jsonl, results.jsonl)",
             f"- resolved config: `{config_file}`", ""]
    lines += inline_plots({**({"Training curves": curves} if curves else {}),
                           "Resolved rate": directory / "resolved_rate.png",
                           "Outcomes": directory / "outcomes.png",
                           "Steps per episode": directory / "steps_hist.png"})
    report_md = (directory / "report.md").read_text(encoding="utf-8")
    # report.md's title and headline are said above, and its image line names files beside it (inline above)
    lines += ["## Report", ""] + [line for line in report_md.splitlines()[1:]
                                  if line != head and not line.startswith("![")]
    return "\n".join(lines)


def wandb_runs_of(config: RunConfig, directory: Path, model: str | None) -> list[WandbRunRecord]:
    """Every W&B run of the run that made this eval (its training too) and of the run that trained ``model``."""
    default = run_paths(config).run_dir
    run_dirs = [producing_run_dir(directory, default), *([producing_run_dir(Path(model), default)] if model else [])]
    return wandb_runs(*run_dirs)


def link_wandb_runs(scope: str, records: list[WandbRunRecord]) -> None:
    """A link artifact per online W&B run, so the flow run's page links the W&B pages."""
    for record in records:
        if record.url and not record.offline:
            create_link_artifact(link=record.url, link_text=f"W&B {record.job_type} run {record.name}",
                                 key=f"{scope}-wandb-{record.job_type}-{record.run_id}".lower(),
                                 description=f"W&B {record.job_type} run of {scope}")


@task(name="publish-report", cache_policy=NO_CACHE)
def publish_report(config_file: str, eval_dir: str, model: str | None = None, learning: str = "") -> str:
    """The report as the UI shows it (also when the evaluation came from the cache): a markdown artifact with the
    summary, the W&B run, the plots inline and the per-task table, plus a table artifact of the results; returns the
    report path: the eval's report.md, or with a ``learning`` dir (learning.md: base / SFT / GRPO before-after,
    eval.compare_stages) the run's report.md holding the before-after table and the eval summary."""
    config = load_resolved(config_file)
    scope = run_scope(config.run_name)
    directory = Path(eval_dir)
    rows = [r.model_dump() for r in ResultsStore(directory / "results.jsonl").load()]
    # the curves of the run that trained ``model``; a plain eval (no model passed) trained nothing
    curves = producing_run_dir(Path(model), run_paths(config).run_dir) / TRAINING_CURVES if model else None
    report_md = (directory / "report.md").read_text(encoding="utf-8")
    markdown = report_artifact_markdown(config, config_file, directory, model, curves)
    link_wandb_runs(scope, wandb_runs_of(config, directory, model))
    create_markdown_artifact(markdown=markdown, key=f"{scope}-report",
                             description=f"evaluation report of {config.run_name}")
    create_table_artifact(table=table_rows(rows, RESULT_COLUMNS), key=f"{scope}-eval-results",
                          description=f"per-task eval results of {config.run_name}")
    if not learning:
        return str(directory / "report.md")
    table = (Path(learning) / "learning.md").read_text(encoding="utf-8")
    create_markdown_artifact(markdown=table, key=f"{scope}-learning",
                             description=f"base / SFT / GRPO before-after of {config.run_name}")
    run_report = Path(learning).parent / "report.md"  # the run dir that made the comparison (see above)
    run_report.write_text("\n".join(
        [f"# {config.run_name}", "", table, "## Evaluation", "",
         *[line for line in report_md.splitlines()[1:] if not line.startswith("![")], "",  # eval-dir-relative plots
         f"Eval report files: `{directory}`", ""]
        + ([f"![training curves]({curves.resolve()})", ""] if curves and curves.is_file() else [])),
        encoding="utf-8")
    return str(run_report)
