"""`gp grade --dataset D --predictions P [--sandbox local|docker]`: grade any SWE-bench-format predictions file
(from any agent) with this project's grading — fresh sandbox, patch guard, test/pytest-config files restored,
hidden tests — and write a per-instance report (status, tests, rejection reasons, what the guard restored)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from graph_planner.config.cli_options import ConfigFile, SetItems, YamlOnly, config_from_cli, sandbox_option

console = Console(stderr=True)

#: Exit codes: 0 graded (whatever the resolved rate), 2 bad input, 3 some instance could not be graded (error).
EXIT_BAD_INPUT = 2
EXIT_GRADING_ERRORS = 3


def grade_cmd(
    dataset: Annotated[Path, typer.Option("--dataset", help="TaskRecord JSONL (a prepared split), or a prepared "
                                          "dir with --split.")],
    predictions: Annotated[Path, typer.Option("--predictions", help="SWE-bench predictions: JSONL rows (or a "
                                              "JSON list) of {instance_id, model_patch, model_name_or_path}.")],
    sandbox: Annotated[str | None, typer.Option("--sandbox", "--backend", parser=sandbox_option,
                                                help="Backend of every instance (default: per task, else "
                                                "backends.sandbox).")] = None,
    split: Annotated[str | None, typer.Option("--split", help="Split to read when --dataset is a dir.")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="JSON report path (default: "
                                                "<output_dir>/grade/<predictions stem>.json).")] = None,
    config_file: ConfigFile = None,
    yaml_only: YamlOnly = False,
    set_items: SetItems = None,
) -> None:
    """Grade a predictions file; exit 0 when every instance was graded, 3 when some errored, 2 on bad input."""
    from graph_planner.data.io import TaskFileError, atomic_write_text, read_task_records, resolve_split_file
    from graph_planner.disk import REPORT_ROOM, check_output_dir
    from graph_planner.validation.grade import (
        DUPLICATE,
        PredictionsError,
        grade_predictions,
        grade_summary,
        read_predictions,
    )

    config = config_from_cli({"config_file": config_file, "yaml_only": yaml_only, "set_items": set_items},
                             write=False)
    try:
        file = resolve_split_file(dataset, split)
        tasks = read_task_records(file)
        rows, problems = read_predictions(predictions)
    except (TaskFileError, PredictionsError) as exc:
        console.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    for problem in problems:
        console.print(f"[yellow]{'warning' if DUPLICATE in problem else 'skipped'}[/yellow] {problem}")
    if not rows:
        console.print(f"[red]error[/red]: {predictions} holds no usable prediction")
        raise typer.Exit(EXIT_BAD_INPUT)

    out = report or (Path(config.logging.output_dir) / "grade" / f"{predictions.stem}.json")
    check_output_dir(out.parent, min_free=REPORT_ROOM)  # before grading: a report that cannot be written loses it

    def progress(grade) -> None:  # type: ignore[no-untyped-def]
        console.print(f"{grade.status:<12} {grade.instance_id} ({grade.seconds:.1f}s)")

    grades = grade_predictions(tasks, rows, config, file.parent, backend=sandbox, on_grade=progress)
    summary = grade_summary(grades, problems)
    table = Table(title=f"gp grade: {predictions.name} on {file}")
    for column in ("instance", "status", "F2P ok/fail", "P2P ok/fail", "notes"):
        table.add_column(column, overflow="fold")
    for g in grades:
        notes = "; ".join(g.tamper_evidence) or g.rejection or g.error or "; ".join(g.guard) or ""
        if g.truncated:
            notes = f"output truncated ({g.output_bytes} bytes); {notes}"
        f2p = f"{len(g.fail_to_pass.get('success', []))}/{len(g.fail_to_pass.get('failure', []))}"
        p2p = f"{len(g.pass_to_pass.get('success', []))}/{len(g.pass_to_pass.get('failure', []))}"
        table.add_row(g.instance_id, g.status, f2p, p2p, notes[:300])
    Console().print(table)
    import json

    payload = {"dataset": str(file), "predictions": str(predictions), "backend": sandbox, "summary": summary,
               "instances": [g.model_dump() for g in grades]}
    atomic_write_text(out, json.dumps(payload, indent=2) + "\n")
    console.print(f"resolved {summary['resolved']}/{summary['submitted']}; tampered: {summary['tampered']}; "
                  f"report: {out}")
    typer.echo(str(out))
    if summary["error"]:
        raise typer.Exit(EXIT_GRADING_ERRORS)
