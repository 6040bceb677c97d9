"""`gp data synth` and `gp data mine`: tasks from a local Python repository (bug injection / fix commits).

Exit codes: 0 tasks written; 1 the input was fine but no candidate validated; 2 bad input (one line saying why,
nothing written).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from graph_planner.config.cli_options import config_from_cli, config_options

err_console = Console(stderr=True, soft_wrap=True)
out_console = Console(soft_wrap=True)

Repos = Annotated[list[Path], typer.Option("--repo", help="Python repository with a pytest suite (repeatable).")]
Out = Annotated[str | None, typer.Option("--out", help="Prepared dir (data.output_dir); tasks go to <out>/<source>.")]


def _bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err_console, transient=True)


def _stage_progress(bar: Progress) -> Callable[[str, int, int], None]:
    """progress(stage, done, total) drawing one bar per stage."""
    tasks: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=total)
        bar.update(tasks[stage], completed=done, total=total)

    return progress


def _fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return typer.Exit(code)


def _table(title: str, summary: Any) -> None:
    table = Table(title=title)
    for column in ("split", "kept", "rejected", "file"):
        table.add_column(column)
    for split, counts in summary.splits.items():
        table.add_row(split, str(counts.kept), str(counts.rejected), counts.path or "-")
    out_console.print(table)


@config_options("config_file", "yaml_only", "set_items", "print_config")
def synth_cmd(
    repo: Repos,
    out: Out = None,
    seed: Annotated[int, typer.Option(help="Seed of target order and modifier choice (same seed, same tasks).")] = 0,
    per_target: Annotated[int, typer.Option(min=1, help="Candidate bugs per function / class.")] = 2,
    max_tasks: Annotated[int | None, typer.Option(min=1, help="Stop after this many validated tasks per repo.")]
    = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Parallel sandboxes (default: CPU count).")] = None,
    val_frac: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of code locations held out as val.")]
    = 0.15,
    test_frac: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of code locations held out as test.")]
    = 0.15,
    executor: Annotated[str, typer.Option(help="Where candidates are validated: local (threads here) or ray (the "
                                          "eval executor's cluster: resources.ray_address / RAY_ADDRESS, else a "
                                          "private local one).")] = "local",
    **options: Any,
) -> None:
    """Inject bugs into REPO's covered functions, keep those its tests catch, write them as tasks (split by code
    location) under <out>/synth: gold patch = the reverse diff, problem statement = the failing tests' symptoms."""
    from graph_planner.synth.synth import SynthOptions, synthesize, write_synth
    from graph_planner.synth.validate import SynthInputError

    config = config_from_cli({**options, "out": out}, extra_map={"out": "data.output_dir"}, write=False)
    if val_frac + test_frac >= 1.0:
        raise _fail(f"--val-frac {val_frac} + --test-frac {test_frac} leave nothing for train")
    if executor not in ("local", "ray"):
        raise _fail(f"--executor {executor!r}: expected local or ray")
    if executor == "ray":
        from graph_planner.eval.ray_executor import executor_problems

        problems = executor_problems(config.model_copy(update={"eval": config.eval.model_copy(
            update={"executor": "ray"})}))
        if problems:
            raise _fail("--executor ray: " + "; ".join(problems))
    opts = SynthOptions(seed=seed, per_target=per_target, max_tasks=max_tasks, val_frac=val_frac,
                        test_frac=test_frac, max_steps=config.data.max_steps, sandbox=config.sandbox,
                        executor=executor, ray_config=config)
    if workers:
        opts.workers = workers
    with _bar() as bar:
        progress = _stage_progress(bar)
        try:
            records, rejected, stats, staging = synthesize(repo, opts, progress)
        except SynthInputError as exc:
            raise _fail(str(exc)) from None
    try:
        if not records:
            raise _fail(f"no candidate validated ({stats.judged} judged: {dict(stats.rejected)}); nothing written", 1)
        summary = write_synth(config.data.output_dir, records, rejected)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _table(f"synthesised -> {Path(config.data.output_dir) / summary.dir}", summary)
    rate = stats.validated / stats.wall_s * 60 if stats.wall_s else 0.0
    out_console.print(f"{stats.validated} task(s) from {stats.judged} candidate(s) judged ({stats.candidates} made) "
                      f"in {stats.wall_s:.1f}s ({rate:.1f}/min); discarded: {dict(stats.rejected) or 'none'}",
                      highlight=False)


@config_options("config_file", "yaml_only", "set_items", "print_config")
def mine_cmd(
    repo: Repos,
    out: Out = None,
    max_commits: Annotated[int, typer.Option(min=1, help="Newest non-merge commits to look at per repo.")] = 200,
    **options: Any,
) -> None:
    """Turn REPO's fix commits (code and tests changed together; the changed tests fail before and pass after)
    into tasks under <out>/mined; the problem statement is the commit message (flagged in metadata)."""
    from graph_planner.synth.mine import SOURCE, mine_repo
    from graph_planner.synth.synth import write_synth
    from graph_planner.synth.validate import SynthInputError

    config = config_from_cli({**options, "out": out}, extra_map={"out": "data.output_dir"}, write=False)
    records, rejected = [], []
    with _bar() as bar:
        progress = _stage_progress(bar)
        try:
            for path in repo:
                recs, rej, stats = mine_repo(path, config.sandbox, max_commits, config.data.max_steps, progress)
                records += recs
                rejected += rej
                out_console.print(f"{path}: {stats.commits} commit(s), {stats.candidates} change code and tests, "
                                  f"{stats.mined} mined in {stats.seconds:.1f}s; discarded: "
                                  f"{stats.rejected or 'none'}", highlight=False)
        except SynthInputError as exc:
            raise _fail(str(exc)) from None
    if not records:
        raise _fail("no fix commit became a task; nothing written", 1)
    summary = write_synth(config.data.output_dir, records, rejected, source=SOURCE)
    _table(f"mined -> {Path(config.data.output_dir) / summary.dir}", summary)
