"""`gp smoke`: one episode of the rule agent on a sample task in a real sandbox, with the trajectory and every test
run logged to JSONL and a JSON report. With the diagnostic `gold` synthesiser the task must be resolved; with
`none` it cannot be: the two runs bracket the env end to end."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, Field

from graph_planner.config.cli_options import (
    SandboxAlias,
    config_from_cli,
    config_options,
)
from graph_planner.config.paths import run_paths
from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord


class SmokeReport(BaseModel):
    task_id: str
    backend: str
    synthesizer: str
    diagnostic: str | None = Field(None, description="'gold' when the diagnostic gold synthesiser was used.")
    policy: str
    resolved: bool
    reward: float
    steps: int
    termination_reason: str
    patch_stats: dict[str, Any]
    tests_run: int
    parse_errors: int
    seconds: float
    trajectory: str = Field(description="Trajectory JSONL (replayable).")
    test_runs: str = Field(description="One JSON line per test run (kind, statuses, seconds).")


def load_task(task_id: str | None, dataset: str | None, shape: str) -> tuple[TaskRecord, Path | None]:
    """A task from a TaskRecord JSONL (``dataset``) or the bundled samples; None = the first one."""
    if dataset:
        from graph_planner.data.io import read_task_records

        records = read_task_records(dataset)
        dataset_dir = Path(dataset) if Path(dataset).is_dir() else Path(dataset).parent
    else:
        from graph_planner.env.samples import load_sample_tasks

        records, dataset_dir = load_sample_tasks(shape), None  # type: ignore[arg-type]
    if not records:
        raise KeyError(f"no tasks in {dataset or 'the bundled samples'}")
    if task_id is None:
        return records[0], dataset_dir
    for record in records:
        if record.task_id == task_id:
            return record, dataset_dir
    raise KeyError(f"no task {task_id!r} in {dataset or f'the bundled {shape} samples'}; available: "
                   f"{', '.join(r.task_id for r in records)}")


def run_smoke(config: RunConfig, task: TaskRecord, dataset_dir: Path | None, log_dir: Path,
              max_steps: int | None = None) -> SmokeReport:
    """Run the smoke episode and write `trajectory.jsonl`, `test_runs.jsonl` under ``log_dir``."""
    from graph_planner.agents.factory import make_policy
    from graph_planner.env.assembly import open_env
    from graph_planner.env.episode import run_episode
    from graph_planner.env.replay import write_trajectory_jsonl
    from graph_planner.sandbox.factory import backend_for

    started = time.perf_counter()
    policy = make_policy(config, planner_backend="rule")  # the smoke test needs no model
    run_id = f"smoke-{uuid.uuid4().hex[:8]}"
    with open_env(task, config, dataset_dir, run_id, max_steps=max_steps) as env:
        trajectory = run_episode(task, env, policy)
        test_runs = list(env.test_runs)
    log_dir.mkdir(parents=True, exist_ok=True)
    traj_path = write_trajectory_jsonl(log_dir / "trajectory.jsonl", trajectory)
    runs_path = log_dir / "test_runs.jsonl"
    runs_path.write_text("".join(json.dumps(r, default=str) + "\n" for r in test_runs), encoding="utf-8")
    info = trajectory.info
    return SmokeReport(
        task_id=task.task_id, backend=backend_for(task, config), synthesizer=str(info.get("synthesizer")),
        diagnostic=info.get("diagnostic"), policy=policy.name, resolved=trajectory.resolved,
        reward=trajectory.reward, steps=trajectory.steps, termination_reason=trajectory.termination_reason,
        patch_stats=info.get("patch_stats", {}), tests_run=int(info.get("tests_run", 0)),
        parse_errors=int(info.get("parse_errors", 0)), seconds=round(time.perf_counter() - started, 3),
        trajectory=str(traj_path), test_runs=str(runs_path),
    )


@config_options("sandbox", "agent", "disable_cgm_synthesis", "run_name", "output_dir", "config_file", "yaml_only", "set_items", "print_config")
def smoke_cmd(
    backend: SandboxAlias = None,
    task: Annotated[str | None, typer.Option("--task", help="Task id (default: the first task).")] = None,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Planner steps.")] = 6,
    report: Annotated[Path, typer.Option("--report", help="Where the JSON report goes.")] = Path("smoke_report.json"),
    synthesizer: Annotated[str | None, typer.Option(
        "--synthesizer", help="cgm | llm | hf | none | gold (gold = DIAGNOSTIC upper bound).")] = None,
    dataset: Annotated[str | None, typer.Option("--dataset", help="TaskRecord JSONL (default: bundled samples).")]
    = None,
    shape: Annotated[str, typer.Option("--shape", help="Bundled sample rows: swebench | r2e.")] = "swebench",
    log_dir: Annotated[Path | None, typer.Option("--log-dir", help="Trajectory / test-run JSONL dir.")] = None,
    require_resolved: Annotated[bool, typer.Option("--require-resolved", help="Exit 1 unless resolved.")] = False,
    **options: Any,
) -> None:
    """Smoke-test the env: the rule agent on one task in a real sandbox; writes a JSON report."""
    from graph_planner.config.model_paths import model_path_problems

    config = config_from_cli({**locals(), **options}, extra_map={"synthesizer": "backends.cgm_backend"},
                             # the rule policy plays; an hf synthesiser loads weights
                             refuse=lambda c: model_path_problems(c, planner=False))
    try:
        record, dataset_dir = load_task(task, dataset, shape)
    except (KeyError, FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    logs = log_dir or run_paths(config).smoke_logs(record.safe_id)
    result = run_smoke(config, record, dataset_dir, logs, max_steps=max_steps)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    label = f" [diagnostic: {result.diagnostic}]" if result.diagnostic else ""
    typer.echo(f"{result.task_id} on {result.backend}: {'RESOLVED' if result.resolved else 'not resolved'} "
               f"(synthesiser {result.synthesizer}{label}, {result.steps} steps, reward {result.reward:g}, "
               f"{result.termination_reason}); report {report}", err=True)
    if require_resolved and not result.resolved:
        raise typer.Exit(1)
