"""`gp validate-tasks DATASET`: gold patch must resolve and the empty patch must not, for every task; prints a
table, writes a JSON report, exits 1 listing the tasks that fail (they must not be used for training/eval)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from graph_planner.config.cli_options import (
    SandboxAlias,
    config_from_cli,
    config_options,
)
from graph_planner.validation.validate import TaskValidation, ValidationReport, validate_tasks

console = Console(stderr=True)


def _row(t: TaskValidation) -> tuple[str, ...]:
    def mark(resolved: bool | None) -> str:
        return "-" if resolved is None else ("resolved" if resolved else "unresolved")

    verdict = "[green]ok[/green]" if t.ok else f"[red]FAIL[/red] {t.error or ''}"
    return (t.task_id, t.backend, t.mode, mark(t.gold.resolved if t.gold else None),
            mark(t.empty.resolved if t.empty else None), f"{t.seconds:.1f}", verdict)


def render_table(report: ValidationReport) -> Table:
    table = Table(title=f"validate-tasks: {report.dataset}")
    for column in ("task", "backend", "mode", "gold patch", "empty patch", "seconds", "result"):
        table.add_column(column, overflow="fold")
    for t in report.tasks:
        table.add_row(*_row(t))
    return table


@config_options("sandbox", "config_file", "yaml_only", "set_items")
def validate_tasks_cmd(
    dataset: Annotated[Path, typer.Argument(help="TaskRecord JSONL, or a prepared dir with --split.")],
    backend: SandboxAlias = None,
    report: Annotated[Path | None, typer.Option("--report", help="JSON report path (default: "
                                                   "<output_dir>/validate-tasks/<dataset>-<backend>.json).")] = None,
    split: Annotated[str | None, typer.Option("--split", help="Split to read when DATASET is a dir.")] = None,
    task_ids: Annotated[list[str] | None, typer.Option("--task-id", help="Only these tasks (repeatable).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Validate the first N tasks.")] = None,
    **options: Any,
) -> None:
    """Validate tasks: the gold patch must grade resolved, the empty patch unresolved (exit 1 if any fails)."""
    from graph_planner.data.io import TaskFileError, atomic_write_text, read_task_records, resolve_split_file
    from graph_planner.disk import REPORT_ROOM, check_output_dir

    backend = options["sandbox"] or backend
    # the backend stays an explicit argument (it beats each task's own), not a config value
    config = config_from_cli({**options, "sandbox": None}, write=False)
    try:
        file = resolve_split_file(dataset, split)
        records = read_task_records(file)
    except TaskFileError as exc:
        console.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(2) from None
    if task_ids:
        unknown = sorted(set(task_ids) - {r.task_id for r in records})
        if unknown:
            console.print(f"[red]error[/red]: --task-id not in {file}: {', '.join(unknown)}")
            raise typer.Exit(2)
        records = [r for r in records if r.task_id in task_ids]
    records = records[:limit] if limit else records
    if not records:
        console.print(f"[red]error[/red]: {file} holds no tasks to validate")
        raise typer.Exit(2)

    out = report or (Path(config.logging.output_dir) / "validate-tasks" / f"{file.stem}-{backend or 'auto'}.json")
    check_output_dir(out.parent, min_free=REPORT_ROOM)  # before validating: the report must be writable

    def progress(t: TaskValidation) -> None:
        console.print(f"{'[green]ok[/green]  ' if t.ok else '[red]FAIL[/red]'} {t.task_id} ({t.seconds:.1f}s)")

    result = validate_tasks(records, config, file.parent, backend=backend, dataset=str(file), on_task=progress)
    Console().print(render_table(result))
    atomic_write_text(out, result.model_dump_json(indent=2) + "\n")
    console.print(f"report: {out}")
    if result.failed:
        console.print(f"[red]{len(result.failed)} of {len(result.tasks)} task(s) failed validation; do not use "
                      "them:[/red]")
        for t in result.failed:
            console.print(f"  {t.task_id}: {t.error}")
        raise typer.Exit(1)
    console.print(f"[green]all {len(result.tasks)} task(s) valid[/green]")
