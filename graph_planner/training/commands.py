"""``gp train``: the local GRPO backend in this process, or the verl backend as a Ray job (after preflight)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from graph_planner.config.cli_options import (
    RUN_OPTIONS,
    config_from_cli,
    config_options,
)
from graph_planner.config.schema import RunConfig

log = logging.getLogger(__name__)


DryRun = Annotated[bool, typer.Option("--dry-run", help="Validate (config, data, model / Ray job entry); no steps.")]
TrainFiles = Annotated[str | None, typer.Option("--train-files", help="verl backend: train parquet.")]
ValFiles = Annotated[str | None, typer.Option("--val-files", help="verl backend: val parquet.")]


def run_local(config: RunConfig, dry_run: bool) -> int:
    """Build the env rollout and the trainer, then train (or, with dry_run, report what would run)."""
    from graph_planner.config.run_dirs import RunDirInUse
    from graph_planner.training.local_run import train_local

    try:
        result = train_local(config, dry_run=dry_run)
    except (FileNotFoundError, RunDirInUse) as exc:  # no prepared data yet / a named run's dir is taken
        typer.echo(f"error: {exc}", err=True)
        return 2
    if dry_run:
        typer.echo(json.dumps({"dry_run": "ok", "backend": "local", "start_step": result.step,
                               "run_dir": str(result.run_dir)}))
        return 0
    typer.echo(f"trained to step {result.step}; checkpoints in {result.run_dir / 'checkpoints'}"
               + (f"; curves {result.curves_png}" if result.curves_png else ""))
    return 0


def prepare_verl_data(config: RunConfig) -> None:
    """No registered parquet yet (a fresh clone): prepare the configured sources (``data.*``; the embedded
    defaults point at the bundled sample) and register them, as `gp data prepare` + `gp data register` would."""
    from graph_planner.data.prepare import prepare_datasets, register_prepared

    typer.echo(f"no verl parquet under {config.data.output_dir}/registry: preparing and registering data.*", err=True)
    summary = prepare_datasets(config.data)
    for result in register_prepared(summary.out_dir, config.data.dataset_name):
        typer.echo(f"registered {result.name}/{result.split}: {result.rows} rows -> {result.path}", err=True)


def run_verl(config: RunConfig, train_files: str | None, val_files: str | None, dry_run: bool) -> int:
    """Preflight, then submit the verl job to Ray (dry runs skip the GPU rules and the cluster GPU check)."""
    from graph_planner.config.preflight import preflight_check
    from graph_planner.training.ray_job import run_training_job, write_job_config
    from graph_planner.training.verl_config import default_data_paths

    if not dry_run:
        try:
            preflight_check(config)
        except ValueError as exc:
            typer.echo(str(exc), err=True)
            return 1
    default = default_data_paths(config)
    if not train_files and not Path(default.train).is_file():
        prepare_verl_data(config)
    train = Path(train_files or default.train).resolve()
    val = val_files or (None if train_files else default.val)
    args = ["--config-file", str(write_job_config(config)), "--train-files", str(train)]
    if val:
        args += ["--val-files", str(Path(val).resolve())]
    outcome = run_training_job(config, args, dry_run=dry_run, sink=typer.echo)
    if outcome.code != 0:
        typer.echo(f"error: {outcome.message or f'Ray job {outcome.job_id} did not succeed'}", err=True)
    elif not dry_run:
        from graph_planner.config.paths import run_paths
        from graph_planner.training.checkpoint import latest_verl_model

        root = run_paths(config).checkpoints
        typer.echo(f"Ray job {outcome.job_id} succeeded; checkpoints in {root}; HF model: "
                   f"{latest_verl_model(root) or '(none: add hf_model to actor.checkpoint.save_contents)'}")
    return outcome.code


def prepull_here(config: RunConfig) -> None:
    """Seed 000's --prepull-containers: pull the manifest's images before training, where the sandboxes run.

    A verl job on a remote cluster (resources.ray_address / RAY_ADDRESS) runs its sandboxes on the cluster's
    nodes, so pulling on this machine would not help: that case says so and leaves it to `gp images prepull` on
    the nodes (the pipeline's prepull step)."""
    import os

    from graph_planner.sandbox.prepull import prepull_for_run

    remote = config.resources.ray_address or os.environ.get("RAY_ADDRESS")
    if config.images.prepull and config.training.backend == "verl" and remote:
        log.warning("images.prepull: the sandboxes run on the Ray cluster at %s; run `gp images prepull` on its "
                    "nodes (nothing is pulled here)", remote)
        return
    try:
        prepull_for_run(config.images, [config.paths.dataset_train, config.paths.dataset_val])
    except (OSError, ValueError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@config_options(*RUN_OPTIONS)
def train_cmd(
    train_files: TrainFiles = None,
    val_files: ValFiles = None,
    dry_run: DryRun = False,
    **options: Any,
) -> None:
    """GRPO training: training.backend=local runs here; verl submits a Ray job (exit 0 ok, 1 failed, 2 refused)."""
    config = config_from_cli({**locals(), **options}, extra_map={"dataset": "paths.dataset_train"})
    if not dry_run:
        prepull_here(config)
    if config.training.backend == "local":
        code = run_local(config, dry_run)
    else:
        code = run_verl(config, train_files, val_files, dry_run)
    raise typer.Exit(code)
