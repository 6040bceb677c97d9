"""``gp train``: the local GRPO backend in this process, or the verl backend as a Ray job (after preflight)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from graph_planner.config.cli_options import (
    RUN_OPTIONS,
    config_from_cli,
    config_options,
)
from graph_planner.config.run_dirs import RunDirInUse
from graph_planner.config.schema import RunConfig

log = logging.getLogger(__name__)
#: `gp train` exit codes (docs/configuration.md "Exit codes"): 0 ok, 1 failed, 2 refused, 4 run dir locked,
#: 5 disk full / read-only (graph_planner.disk).
EXIT_RUN_LOCKED = 4


DryRun = Annotated[bool, typer.Option("--dry-run", help="Validate (config, data, model / Ray job entry); no steps.")]
TrainFiles = Annotated[str | None, typer.Option("--train-files", help="verl backend: train parquet.")]
ValFiles = Annotated[str | None, typer.Option("--val-files", help="verl backend: val parquet.")]


def run_local(config: RunConfig, dry_run: bool) -> int:
    """Build the env rollout and the trainer, then train (or, with dry_run, report what would run).

    Every refusal comes before the run's directory is touched: a run dir holding an earlier run (exit 2), missing
    training data (exit 2), then the run lock (exit 4). Only the owner writes resolved_config.yaml."""
    from graph_planner.config.loader import owned_run
    from graph_planner.config.paths import run_paths
    from graph_planner.config.run_dirs import refuse_clobber
    from graph_planner.config.run_lock import RunLockedError, refuse_if_locked
    from graph_planner.disk import check_output_dir
    from graph_planner.training.local import rollout
    from graph_planner.training.local.run import train_local

    try:
        refuse_if_locked(run_paths(config).run_dir)  # a live run first: its files are not "an earlier run"
    except RunLockedError as exc:
        typer.echo(f"error: {exc}", err=True)
        return EXIT_RUN_LOCKED
    try:
        refuse_clobber(run_paths(config).run_dir, config.training.resume_from)
        if not dry_run:
            prepull_here(config)  # a missing manifest is refused here; images land outside the run dir
        made = rollout.make_env_rollout(config)  # no prepared data yet / no model policy: refused here
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        return 2
    try:
        with owned_run(config) as run_dir:
            if not dry_run:
                check_output_dir(run_dir)
            result = train_local(config, dry_run=dry_run, rollout=made)
    except RunLockedError as exc:  # another gp train on this run dir
        typer.echo(f"error: {exc}", err=True)
        return EXIT_RUN_LOCKED
    except RunDirInUse as exc:  # an earlier run finished between the check and the lock
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
    from graph_planner.training.ray.job import run_training_job, write_job_config
    from graph_planner.training.verl.config import default_data_paths

    if not dry_run:
        try:
            preflight_check(config)
        except ValueError as exc:
            typer.echo(str(exc), err=True)
            return 1
    from graph_planner.training.ray.job import user_cluster_auth_problem

    problem = user_cluster_auth_problem(config)  # before anything is prepared or written
    if problem:
        typer.echo(f"error: {problem}", err=True)
        return 2
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
        from graph_planner.training.local.checkpoint import latest_verl_model

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
    """GRPO training: training.backend=local runs here; verl submits a Ray job (exit 0 ok, 1 failed, 2 refused,
    4 run dir in use, 5 disk full or read-only)."""
    from graph_planner.config.loader import owned_run
    from graph_planner.config.model_paths import model_path_problems
    from graph_planner.config.run_lock import RunLockedError, refuse_if_locked

    config = config_from_cli({**locals(), **options}, write=False, extra_map={"dataset": "paths.dataset_train"})
    remote = config.training.backend == "verl" and (config.resources.ray_address or os.environ.get("RAY_ADDRESS"))
    problems = [] if remote else model_path_problems(config, training=True)  # a cluster's paths are its own
    if problems:
        typer.echo(f"error: {'; '.join(problems)}", err=True)
        raise typer.Exit(2)
    if config.training.backend == "local":
        raise typer.Exit(run_local(config, dry_run))
    from graph_planner.config.paths import run_paths
    from graph_planner.config.run_dirs import refuse_clobber

    try:
        refuse_if_locked(run_paths(config).run_dir)
        refuse_clobber(run_paths(config).run_dir, config.training.resume_from)
    except RunLockedError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_RUN_LOCKED) from None
    except RunDirInUse as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        with owned_run(config):
            if not dry_run:
                prepull_here(config)
            code = run_verl(config, train_files, val_files, dry_run)
    except RunLockedError as exc:
        typer.echo(f"error: {exc}", err=True)
        code = EXIT_RUN_LOCKED
    raise typer.Exit(code)
