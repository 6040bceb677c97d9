"""`gp eval`: run the policy over a prepared split with N concurrent sandboxes; resumable; writes the report."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from graph_planner.config.cli_options import (
    config_from_cli,
    config_options,
)
from graph_planner.disk import find_disk_error
from graph_planner.eval.ray_faults import ClusterLost, exit_now

#: Exit codes of `gp eval` (docs/evaluation.md): 0 every task ran (resolved or not), 2 bad input,
#: 3 some task errored (sandbox_error / agent_error rows: the report holds them; resume retries them),
#: 4 another run holds the run directory, 5 the output disk is full or read-only (graph_planner.disk),
#: 6 the Ray cluster's head was lost mid-run (eval.executor=ray): report.json holds what finished, the same command
#: resumes.
EXIT_TASK_ERRORS = 3
EXIT_RUN_LOCKED = 4
EXIT_CLUSTER_LOST = 6


@config_options("config_file", "yaml_only", "set_items", "print_config", "wandb_offline", "dataset", "agent", "model_path", "cgm_model_path", "docker_manifest", "disable_cgm_synthesis", "run_name", "output_dir", "sandbox", "prepull_containers", "prepull_max_workers", "prepull_retries", "prepull_delay", "prepull_timeout", "val_dataset")
def eval_cmd(
    dataset_split: Annotated[str | None, typer.Option("--dataset-split", help="Split name (eval.split).")] = None,
    batch_size: Annotated[int | None, typer.Option(
        "--batch-size", help="Concurrent episodes (sandboxes open at once: at most parallel.workflow_parallel).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Evaluate the first N tasks.")] = None,
    executor: Annotated[str | None, typer.Option("--executor", help="local | ray")] = None,
    baselines: Annotated[bool | None, typer.Option("--baselines/--no-baselines",
                                                      help="Add gold / empty-patch rows.")] = None,
    swebench_harness: Annotated[bool | None, typer.Option(
        "--swebench-harness/--no-swebench-harness",
        help="Also grade predictions.jsonl with the official swebench harness (needs the tasks' images locally; "
             "eval.use_swebench_harness).")] = None,
    **options: Any,
) -> None:
    """Evaluate a policy; killed runs resume on the same --run-name (finished tasks are skipped)."""
    from graph_planner.config.loader import owned_run
    from graph_planner.config.model_paths import model_path_problems
    from graph_planner.config.run_lock import RunLockedError
    from graph_planner.disk import check_output_dir
    from graph_planner.eval.api import EVAL_SUBDIR, eval_run_dir, evaluate_dataset, load_eval_tasks
    from graph_planner.eval.ray_executor import check_executor
    from graph_planner.sandbox.prepull import prepull_for_run

    config = config_from_cli({**locals(), **options}, write=False, extra_map={
        "dataset": "paths.dataset_eval", "dataset_split": "eval.split", "batch_size": "eval.batch_size",
        "limit": "eval.limit", "executor": "eval.executor", "baselines": "eval.baselines",
        "swebench_harness": "eval.use_swebench_harness"})
    console = Console(stderr=True)
    try:
        # every refusal before anything is written or loaded: inputs, model paths, then the run lock
        if not config.paths.dataset_eval:
            raise ValueError("no eval dataset: set paths.dataset_eval or pass --dataset")
        load_eval_tasks(config.paths.dataset_eval, config.eval.limit, config.eval.split)
        problems = model_path_problems(config)
        if problems:
            raise ValueError("; ".join(problems))
        check_executor(config)  # a user's token-auth cluster without a token: refused before anything is written
        with owned_run(config, lock_dir=EVAL_SUBDIR):
            check_output_dir(eval_run_dir(config))
            prepull_for_run(config.images, [config.paths.dataset_eval, config.paths.dataset_val])
            outcome = evaluate_dataset(config, console=console)
    except RunLockedError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(EXIT_RUN_LOCKED) from None
    except ClusterLost as exc:
        typer.echo(exc.line(), err=True)
        exit_now(EXIT_CLUSTER_LOST)
    except (FileNotFoundError, ValueError, ConnectionError, RuntimeError) as exc:
        if find_disk_error(exc):
            raise  # exit 5 with one line (graph_planner.cli)
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    diagnostic = outcome.summary.get("diagnostic")
    table = Table(title=f"eval {config.run_name}" + (f" — DIAGNOSTIC ({diagnostic})" if diagnostic else ""))
    for column in ("label", "tasks", "resolved", "rate", "mean steps", "errors", "tampered"):
        table.add_column(column)
    for label, s in outcome.summary["labels"].items():
        table.add_row(label, str(s["tasks"]), str(s["resolved"]), f"{s['resolved_rate']:.1%}",
                      f"{s['mean_steps']:.1f}", str(s["errors"]), str(s.get("tampered", 0)))
    harness = outcome.summary.get("harness")
    if harness and harness.get("ran"):
        table.add_row("swebench harness", str(harness["submitted"]), str(harness["resolved"]),
                      f"{harness['resolved_rate']:.1%}", "-", str(harness.get("errors", 0)), "-")
    console.print(table)
    if harness and not harness.get("ran"):
        console.print(f"official swebench harness did not run: {harness['note']}")
    if diagnostic:
        console.print(f"[yellow]{outcome.summary['diagnostic_note']}[/yellow]")
    console.print(f"report: {outcome.report_path}")
    typer.echo(str(outcome.report_path))
    errored = [r for r in outcome.results if r.label == "policy" and r.status == "error"]
    if errored:
        causes = sorted({f"{r.category}: {(r.error or '')[:160]}" for r in errored})
        console.print(f"[red]{len(errored)} task(s) errored[/red] (they are retried when this run is resumed):")
        for cause in causes[:10]:
            console.print(f"  {cause}")
        raise typer.Exit(EXIT_TASK_ERRORS)
