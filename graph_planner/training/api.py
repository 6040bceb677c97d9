"""`train`: the training stage as one plain function, as :mod:`graph_planner.eval.api` is for eval. `gp train`
prints its outcome; the Prefect train task adds caching, the retried job submission, progress artifacts and turns
a non-zero outcome into a failed step. Everything that decides how a run trains is here, once:

- the engine: ``training.backend`` (``local`` trains in this process, ``verl`` submits a Ray job);
- the refusals, in this order, before the run directory is written: model paths that cannot load here (exit 2;
  skipped for a user's Ray cluster, whose paths are its own), verl preflight (exit 1), a user's token-auth
  cluster without a token (exit 2), a live run on the run dir (exit 4), an earlier run in it (exit 2), missing
  inputs (training data, an explicit val file: exit 2), a failed prepull (exit 2);
- the verl job's data: :func:`graph_planner.training.verl.config.verl_data_files` (the val-file rule);
- the prepull: :func:`graph_planner.integrations.ray_cluster.prepull_here`;
- the model to evaluate: :func:`graph_planner.config.checkpoints.final_model`, whichever engine wrote it.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from graph_planner.config.schema import RunConfig

log = logging.getLogger(__name__)

#: Exit statuses of a training run (`gp train` exits with them; docs/configuration.md "Exit codes").
EXIT_OK, EXIT_FAILED, EXIT_REFUSED, EXIT_RUN_LOCKED = 0, 1, 2, 4
#: verl's console logger: ``step:<k> - name:value - ...`` once a step.
_VERL_STEP = re.compile(r"\bstep:(\d+)\b")

StepCallback = Callable[[dict[str, float], int, int], None]
LineCallback = Callable[[str], None]


@dataclass
class TrainOutcome:
    """How a training run ended and what it left: ``exit_code`` 0 ok / 1 failed / 2 refused / 4 run dir in use
    (or 130 / 143 interrupted), ``message`` says why when it is not 0."""

    engine: Literal["local", "verl"]
    exit_code: int
    run_dir: Path
    message: str = ""
    dry_run: bool = False
    steps_done: int = 0
    checkpoint: Path | None = None  # step_<k> (local) / global_step_<k> (verl)
    model_dir: Path | None = None  # the final HF model dir: what eval and the learning report load
    metrics_path: Path | None = None
    curves_png: Path | None = None
    job_id: str | None = None  # verl: the Ray job
    job_log: str | None = None  # verl: the job driver's log, kept in <run dir>/verl when the head was local
    tracking: dict[str, str] | None = None  # W&B URL or offline dir, when W&B ran (local engine)
    head_start_s: float = 0.0  # verl: seconds the private local head took to answer (0: a user's cluster)

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def train(config: RunConfig, *, train_files: str | None = None, val_files: str | None = None,
          registry: str | Path | None = None, dry_run: bool = False, on_step: StepCallback | None = None,
          job_log: LineCallback | None = None, progress: LineCallback | None = None,
          submit: Callable[..., str] | None = None, write_config: bool = True) -> TrainOutcome:
    """Train to ``training.total_steps`` on the configured engine (or, with ``dry_run``, check what would run).

    ``train_files`` / ``val_files`` / ``registry``: the verl job's parquet (default the registered data; with
    none registered yet, ``data.*`` is prepared and registered first). ``on_step(metrics, step, total)``: after
    each step, both engines (verl: its console logger's line). ``job_log``: each line of the verl job's log.
    ``progress``: one-line notes (data preparation). ``submit``: the job submission (the Prefect task passes its
    retried wrapper). ``write_config``: claim the run dir and write ``resolved_config.yaml`` under the run lock
    (the CLI); False when a flow already wrote it and later steps read that file."""
    from graph_planner.config.paths import run_paths

    engine = config.training.backend
    run_dir = run_paths(config).run_dir
    say = progress or log.info
    try:
        refuse_unloadable_models(config)
        if engine == "verl":
            data = _verl_preparation(config, train_files, val_files, registry, dry_run, say)
        _refuse_run_dir(run_dir, config.training.resume_from)
        if not dry_run:
            _prepull(config)
        made = _local_rollout(config) if engine == "local" else None
        with _run_dir_owned(config, write_config, dry_run) as owned:  # an unnamed run's dir is claimed here
            if engine == "local":
                return _train_local(config, made, dry_run, on_step)
            return _train_verl(config, owned, data, dry_run, on_step, job_log, submit)
    except _Refused as exc:
        return TrainOutcome(engine, exc.code, run_dir, str(exc), dry_run)


def refuse_unloadable_models(config: RunConfig) -> None:
    """Model paths that cannot load here (a typo, an uncached hub id offline); a user's Ray cluster has its own
    paths, so a verl run there is not checked here."""
    from graph_planner.config.model_paths import model_path_problems
    from graph_planner.integrations.ray_cluster import training_cluster

    problems = [] if training_cluster(config) else model_path_problems(config, training=True)
    if problems:
        raise _Refused(EXIT_REFUSED, "; ".join(problems))


def _refuse_run_dir(run_dir: Path, resume_from: str | None) -> None:
    """A live run first (its files are not "an earlier run"), then an earlier run's checkpoints."""
    from graph_planner.config.run_dirs import RunDirInUse, refuse_clobber
    from graph_planner.config.run_lock import RunLockedError, refuse_if_locked

    try:
        refuse_if_locked(run_dir)
        refuse_clobber(run_dir, resume_from)
    except RunLockedError as exc:
        raise _Refused(EXIT_RUN_LOCKED, str(exc)) from None
    except RunDirInUse as exc:
        raise _Refused(EXIT_REFUSED, str(exc)) from None


def _prepull(config: RunConfig) -> None:
    from graph_planner.integrations.ray_cluster import prepull_here
    from graph_planner.sandbox.prepull import prepull_for_run

    if not prepull_here(config, ["train"]):
        return
    try:  # a missing manifest is refused here; images land outside the run dir
        prepull_for_run(config.images, [config.paths.dataset_train, config.paths.dataset_val])
    except (OSError, ValueError, RuntimeError) as exc:
        raise _Refused(EXIT_REFUSED, str(exc)) from None


def _local_rollout(config: RunConfig):  # -> (tasks, rollout_fn)
    from graph_planner.training.local import rollout

    try:
        return rollout.make_env_rollout(config)  # no prepared data yet / no model policy: refused here
    except (FileNotFoundError, ValueError) as exc:
        raise _Refused(EXIT_REFUSED, str(exc)) from None


@contextlib.contextmanager
def _run_dir_owned(config: RunConfig, write_config: bool, dry_run: bool) -> Iterator[Path]:
    """The run lock for the whole run (and, with ``write_config``, the claimed dir and its resolved config: an
    unnamed run gets its ``<name>-<UTC stamp>`` dir here); yields the run dir."""
    from graph_planner.config.loader import owned_run
    from graph_planner.config.paths import run_paths
    from graph_planner.config.run_dirs import RunDirInUse
    from graph_planner.config.run_lock import RunLockedError, run_lock
    from graph_planner.disk import check_output_dir

    try:
        with owned_run(config) if write_config else run_lock(run_paths(config).run_dir):
            run_dir = run_paths(config).run_dir  # after the claim
            if not dry_run:
                check_output_dir(run_dir)
            yield run_dir
    except RunLockedError as exc:  # another run took the dir between the check and the lock
        raise _Refused(EXIT_RUN_LOCKED, str(exc)) from None
    except RunDirInUse as exc:  # an earlier run finished between the check and the lock
        raise _Refused(EXIT_REFUSED, str(exc)) from None


def _metrics_path(run_dir: Path) -> Path | None:
    from graph_planner.training.verl.telemetry import VERL_METRICS_FILE

    for path in (run_dir / "metrics.jsonl", run_dir / "verl" / VERL_METRICS_FILE):
        if path.is_file():
            return path
    return None


def _train_local(config: RunConfig, made: tuple, dry_run: bool, on_step: StepCallback | None) -> TrainOutcome:
    from graph_planner.config.checkpoints import MODEL_DIR
    from graph_planner.training.local.run import train_local

    result = train_local(config, on_step=on_step, dry_run=dry_run, rollout=made)
    checkpoint = result.checkpoint
    if not dry_run and checkpoint is None:
        return TrainOutcome("local", EXIT_FAILED, result.run_dir, f"training finished without a checkpoint in "
                            f"{result.run_dir}/checkpoints", steps_done=result.step)
    return TrainOutcome("local", EXIT_OK, result.run_dir, dry_run=dry_run, steps_done=result.step,
                        checkpoint=checkpoint, model_dir=checkpoint / MODEL_DIR if checkpoint else None,
                        metrics_path=_metrics_path(result.run_dir), curves_png=result.curves_png,
                        tracking=result.tracking or None)


def _verl_preparation(config: RunConfig, train_files: str | None, val_files: str | None,
                      registry: str | Path | None, dry_run: bool, say: LineCallback):  # -> VerlDataPaths
    """Preflight (GPU rules; not for a dry run), the user cluster's auth, then the job's data files."""
    from graph_planner.config.preflight import preflight_check
    from graph_planner.integrations.ray_cluster import training_cluster
    from graph_planner.training.ray.job import user_cluster_auth_problem
    from graph_planner.training.verl.config import verl_data_files

    if not dry_run:
        try:
            preflight_check(config)
        except ValueError as exc:
            raise _Refused(EXIT_FAILED, str(exc)) from None
    problem = user_cluster_auth_problem(config)  # before anything is prepared or written
    if problem:
        raise _Refused(EXIT_REFUSED, problem)
    try:
        data = verl_data_files(config, train_files, val_files, registry)
    except FileNotFoundError as exc:
        raise _Refused(EXIT_REFUSED, str(exc)) from None
    if not train_files and registry is None and not Path(data.train).is_file():
        _prepare_verl_data(config, say)
    if not Path(data.train).is_file() and not training_cluster(config):  # a user's cluster: its own paths
        raise _Refused(EXIT_REFUSED, f"train file not found: {data.train} (--train-files / `gp data register`)")
    return verl_data_files(config, train_files, val_files, registry)  # a val file may have been registered too


def _prepare_verl_data(config: RunConfig, say: LineCallback) -> None:
    """No registered parquet yet (a fresh clone): prepare the configured sources (``data.*``; the embedded
    defaults point at the bundled sample) and register them, as `gp data prepare` + `gp data register` would."""
    from graph_planner.data.prepare import prepare_datasets, register_prepared

    say(f"no verl parquet under {config.data.output_dir}/registry: preparing and registering data.*")
    try:
        summary = prepare_datasets(config.data)
        for result in register_prepared(summary.out_dir, config.data.dataset_name):
            say(f"registered {result.name}/{result.split}: {result.rows} rows -> {result.path}")
    except (OSError, ValueError, RuntimeError) as exc:  # a source that cannot load (offline hub, missing file)
        raise _Refused(EXIT_REFUSED, f"preparing the verl data (data.*) failed: {exc}") from None


def verl_step_metrics(line: str) -> tuple[int, dict[str, float]] | None:
    """``(step, metrics)`` of one line of verl's console logger (``step:2 - actor/pg_loss:0.1 - ...``)."""
    match = _VERL_STEP.search(line)
    if match is None:
        return None
    metrics: dict[str, float] = {}
    for part in line[match.end():].split(" - "):
        name, _, value = part.strip().rpartition(":")
        with contextlib.suppress(ValueError):
            if name:
                metrics[name] = float(value)
    return int(match.group(1)), metrics


def _train_verl(config: RunConfig, run_dir: Path, data, dry_run: bool, on_step: StepCallback | None,
                job_log: LineCallback | None, submit: Callable[..., str] | None) -> TrainOutcome:
    from graph_planner.config.checkpoints import final_model
    from graph_planner.training.curves import plot_training_curves
    from graph_planner.training.ray.job import EXIT_SUCCEEDED, run_training_job, submit_job, write_job_config

    args = ["--config-file", str(write_job_config(config)), "--train-files", str(Path(data.train).resolve())]
    if data.val:
        args += ["--val-files", str(Path(data.val).resolve())]
    total, steps = config.training.total_steps, [0]

    def sink(line: str) -> None:
        if job_log is not None:
            job_log(line)
        parsed = verl_step_metrics(line)
        if parsed is not None:
            steps[0] = max(steps[0], parsed[0])
            if on_step is not None:
                on_step(parsed[1], parsed[0], total)

    job = run_training_job(config, args, dry_run=dry_run, sink=sink, submit=submit or submit_job)
    outcome = TrainOutcome("verl", job.code, run_dir, job.message, dry_run, steps[0], job_id=job.job_id,
                           job_log=job.log_path, metrics_path=_metrics_path(run_dir), head_start_s=job.head_start_s)
    if job.code != EXIT_SUCCEEDED:
        outcome.message = job.message or f"Ray job {job.job_id} did not succeed"
    elif not dry_run:
        trained = final_model(run_dir)
        if trained is not None:
            outcome.checkpoint, outcome.model_dir = trained.checkpoint, trained.model_dir
            outcome.steps_done = max(outcome.steps_done, trained.step)
    if not dry_run:  # the job's telemetry bridge wrote metrics.jsonl here (none on a user's cluster: no curves)
        outcome.curves_png = plot_training_curves(run_dir, config.run_name)
    return outcome
