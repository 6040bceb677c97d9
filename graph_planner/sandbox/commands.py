"""`gp sandbox ...` (reap containers of dead runs) and `gp images ...` (build task images, prepull a manifest):
thin CLI shells over graph_planner.sandbox.{reaper,images,prepull}; progress and tables with rich."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from graph_planner.config.cli_options import (
    config_from_cli,
    config_options,
)

if TYPE_CHECKING:
    import docker

sandbox_app = typer.Typer(help="Docker sandbox maintenance.", no_args_is_help=True)
images_app = typer.Typer(help="Task images: build sample/custom images, prepull prebuilt ones.", no_args_is_help=True)
console = Console(stderr=True)


def _client() -> docker.DockerClient:
    from graph_planner.sandbox.base import SandboxError
    from graph_planner.sandbox.docker import docker_client

    try:
        return docker_client()
    except SandboxError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None


@sandbox_app.command("reap")
def reap_cmd(
    run_id: Annotated[str | None, typer.Option("--run-id", help="Remove every container of this run.")] = None,
    all_dead: Annotated[bool, typer.Option(
        "--all-dead", help="Remove containers whose owner process on this host is dead (default without "
        "--run-id).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed.")] = False,
) -> None:
    """Remove graph-planner containers and local temp repo copies of runs that are gone (owner pid dead)."""
    from graph_planner.sandbox.local_copies import reap_local_copies
    from graph_planner.sandbox.reaper import reap

    verb = "would remove" if dry_run else "removed"
    copies = reap_local_copies(run_id=run_id, dry_run=dry_run)
    console.print(f"{verb} {len(copies.removed)} local sandbox copy(ies); kept {copies.kept} of live runs")
    for path in copies.removed:
        console.print(f"  {path}")
    from graph_planner.sandbox.base import SandboxError
    from graph_planner.sandbox.docker import docker_client

    try:
        client = docker_client()
    except SandboxError as exc:
        console.print(f"containers not checked: {exc}")
        return
    result = reap(client, run_id=run_id, dead_owners=all_dead or run_id is None, dry_run=dry_run)
    console.print(f"{verb} {len(result.removed)} container(s); kept {result.kept} of live runs")
    for name in result.removed:
        console.print(f"  {name}")
    for name, reason in result.failed.items():
        console.print(f"  [red]{name}: {reason}[/red]")
    if result.failed:
        raise typer.Exit(1)


@images_app.command("build")
def build_cmd(
    dataset: Annotated[Path, typer.Argument(help="TaskRecord JSONL, or a prepared dir (all splits of all its "
                                            "sources).")],
    split: Annotated[str | None, typer.Option("--split", help="Only this split of a prepared dir.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the source digest matches.")] = False,
    network: Annotated[bool, typer.Option("--network", help="Let custom setup commands use the network.")] = False,
) -> None:
    """Build the images of sample tasks (repo_path) and custom tasks (build spec); prebuilt ones are skipped."""
    from graph_planner.data.io import NON_SPLIT_FILES, TaskFileError, read_task_records
    from graph_planner.sandbox.images import build_task_images

    files = [dataset] if dataset.is_file() or split else sorted(
        p for pattern in ("*.jsonl", "*/*.jsonl") for p in dataset.glob(pattern) if p.name not in NON_SPLIT_FILES)
    if not files:
        console.print(f"[red]no TaskRecord JSONL in {dataset}[/red]")
        raise typer.Exit(2)
    client = _client()
    failed = 0
    table = Table("image(s)", "status", "tasks", "seconds", "reason", title="gp images build")
    for file in files:
        try:
            records = read_task_records(file, split)
        except TaskFileError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from None
        base = file.parent if file.is_file() else file
        with console.status(f"building images for {file}"):
            results = build_task_images(records, base, client=client, network=network, force=force)
        for res in results:
            failed += res.status == "failed"
            colour = {"built": "green", "cached": "cyan", "skipped": "yellow", "failed": "red"}[res.status]
            table.add_row("\n".join(res.tags) or "-", f"[{colour}]{res.status}[/{colour}]", str(len(res.task_ids)),
                          f"{res.seconds:.1f}", res.reason)
    console.print(table)
    if failed:
        raise typer.Exit(1)


@images_app.command("prepull")
@config_options("config_file", "yaml_only", "set_items")
def prepull_cmd(
    manifest: Annotated[str | None, typer.Option("--manifest", help="Image list: one per line or JSON list "
                                                    "(default: images.manifest).")] = None,
    max_workers: Annotated[int | None, typer.Option("--max-workers", help="Parallel pulls.")] = None,
    retries: Annotated[int | None, typer.Option("--retries", help="Extra attempts per image.")] = None,
    delay: Annotated[float | None, typer.Option("--delay", help="Seconds before the first retry "
                                                   "(doubles, jittered).")] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Seconds per pull attempt.")] = None,
    **options: Any,
) -> None:
    """Pull every image of a manifest in parallel; exit 1 when any image failed (reasons in the table)."""
    from graph_planner.data.manifest import ManifestError, read_manifest
    from graph_planner.sandbox.prepull import prepull_images

    config = config_from_cli({**locals(), **options}, write=False, extra_map={
        "manifest": "images.manifest", "max_workers": "images.prepull_max_workers",
        "retries": "images.prepull_retries", "delay": "images.prepull_delay", "timeout": "images.prepull_timeout"})
    images_config = config.images
    if not images_config.manifest:
        console.print("[red]no manifest: give --manifest FILE (or images.manifest in the config)[/red]")
        raise typer.Exit(2)
    try:
        images = read_manifest(images_config.manifest)
    except ManifestError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    client = _client()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task(f"prepull ({images_config.prepull_max_workers} workers)", total=len(images))

        def on_event(image: str, event: str, detail: str) -> None:
            if event in ("present", "pulled", "failed"):
                progress.advance(bar)
            progress.update(bar, description=f"{event} {image} {detail}"[:100])

        report = prepull_images(images, max_workers=images_config.prepull_max_workers,
                                retries=images_config.prepull_retries, delay=images_config.prepull_delay,
                                timeout=images_config.prepull_timeout, progress=on_event,
                                client=client)
        progress.update(bar, description="prepull done")
    table = Table("image", "status", "attempts", "seconds", "reason", title="gp images prepull")
    colours = {"pulled": "green", "present": "cyan", "failed": "red"}
    for res in report.results:
        colour = colours[res.status]
        table.add_row(res.image, f"[{colour}]{res.status}[/{colour}]", str(res.attempts), f"{res.seconds:.1f}",
                      res.reason)
    console.print(table)
    counts = report.to_dict()["counts"]
    console.print(f"pulled {counts['pulled']}, already present {counts['present']}, failed {counts['failed']} "
                  f"in {report.seconds:.1f}s")
    if not report.ok:
        raise typer.Exit(1)
