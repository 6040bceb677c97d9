"""``gp train``: :func:`graph_planner.training.api.train` with the CLI's flags, its outcome printed."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from graph_planner.config.cli_options import (
    RUN_OPTIONS,
    config_from_cli,
    config_options,
)

if TYPE_CHECKING:
    from graph_planner.training.api import TrainOutcome

#: `gp train` exits with the outcome's code (docs/configuration.md "Exit codes"): 0 ok, 1 failed, 2 refused,
#: 4 run dir locked, 5 disk full / read-only (graph_planner.disk), 130 / 143 interrupted.


DryRun = Annotated[bool, typer.Option("--dry-run", help="Validate (config, data, model / Ray job entry); no steps.")]
TrainFiles = Annotated[str | None, typer.Option("--train-files", help="verl backend: train parquet.")]
ValFiles = Annotated[str | None, typer.Option("--val-files", help="verl backend: val parquet.")]


def report(outcome: TrainOutcome) -> int:
    """Print the outcome (an error line on stderr; a dry run's JSON or the trained model on stdout); its exit code."""
    if not outcome.ok:
        typer.echo(f"error: {outcome.message}", err=True)
        return outcome.exit_code
    if outcome.dry_run:
        typer.echo(json.dumps({"dry_run": "ok", "backend": outcome.engine, "start_step": outcome.steps_done,
                               "run_dir": str(outcome.run_dir)}))
    elif outcome.engine == "local":
        typer.echo(f"trained to step {outcome.steps_done}; checkpoints in {outcome.run_dir / 'checkpoints'}"
                   + (f"; curves {outcome.curves_png}" if outcome.curves_png else ""))
    else:
        typer.echo(f"Ray job {outcome.job_id} succeeded; checkpoints in {outcome.run_dir / 'checkpoints'}; HF model: "
                   f"{outcome.model_dir or '(none: add hf_model to actor.checkpoint.save_contents)'}"
                   + (f"; curves {outcome.curves_png}" if outcome.curves_png else ""))
    return outcome.exit_code


@config_options(*RUN_OPTIONS)
def train_cmd(
    train_files: TrainFiles = None,
    val_files: ValFiles = None,
    dry_run: DryRun = False,
    **options: Any,
) -> None:
    """GRPO training: training.backend=local runs here; verl submits a Ray job (exit 0 ok, 1 failed, 2 refused,
    4 run dir in use, 5 disk full or read-only)."""
    from graph_planner.training.api import train

    config = config_from_cli({**locals(), **options}, write=False, extra_map={"dataset": "paths.dataset_train"})
    outcome = train(config, train_files=train_files, val_files=val_files, dry_run=dry_run,
                    job_log=typer.echo, progress=lambda line: typer.echo(line, err=True))
    raise typer.Exit(report(outcome))
