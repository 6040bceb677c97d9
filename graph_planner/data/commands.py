"""`gp data prepare | register | manifest`: thin shells over graph_planner.data (flags map onto ``data.*``).

Exit codes: 0 ok; 1 every row was rejected (nothing usable); 2 a setting is wrong (config, missing dataset).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from graph_planner.config.cli_options import (
    config_from_cli,
    config_options,
)
from graph_planner.config.paths import run_paths
from graph_planner.config.schema import RunConfig

data_app = typer.Typer(
    help="Task data: prepare sources into TaskRecord JSONL, register verl/rLLM parquet, write docker manifests.",
    no_args_is_help=True,
)
err_console = Console(stderr=True, soft_wrap=True)
out_console = Console(soft_wrap=True)

#: CLI parameter -> dotted config key (the run config owns every data setting).
PREPARE_FLAGS = {
    "out": "data.output_dir",
    "r2e_dataset": "data.r2e_dataset",
    "r2e_split": "data.r2e_split",
    "r2e_val_split": "data.r2e_val_split",
    "r2e_val_size": "data.r2e_val_size",
    "r2e_limit": "data.r2e_limit",
    "skip_r2e": "data.skip_r2e",
    "swebench_dataset": "data.swebench_dataset",
    "swebench_split": "data.swebench_split",
    "swebench_limit": "data.swebench_limit",
    "skip_swebench": "data.skip_swebench",
    "custom": "data.custom_path",
    "repos_dir": "data.repos_dir",
    "max_steps": "data.max_steps",
}


def source_outputs_to_out(out: str | None, per_source: dict[str, str | None]) -> str | None:
    """Seed 000's ``--r2e-output datasets/r2e_gym`` / ``--swebench-output datasets/swebench`` name source dirs;
    ours are ``<out>/<source>``, so each must end in its source name and all must share one parent (= --out)."""
    parents = {}
    for source, value in per_source.items():
        if value is None:
            continue
        path = Path(value)
        if path.name != source:
            raise ValueError(f"--{source.split('_')[0]}-output {value}: the prepared layout is <out>/{source}, so "
                             f"the dir must end in /{source} (e.g. datasets/{source}); or pass --out")
        parents[source] = str(path.parent)
    if len(set(parents.values())) > 1:
        raise ValueError(f"--r2e-output and --swebench-output must share one parent dir, got {parents}")
    parent = next(iter(parents.values()), None)
    if parent is not None and out is not None and Path(out) != Path(parent):
        raise ValueError(f"--out {out} contradicts the source output dirs (parent {parent})")
    return parent or out


def _resolve_config(params: dict[str, Any], extra_map: dict[str, str]) -> RunConfig:
    """Run config for a data command; --hf-token is applied afterwards so the secret never reaches a log line."""
    token = params.pop("hf_token", None)
    config = config_from_cli(params, extra_map=extra_map, write=False)
    if token:
        config.data.hf_token = SecretStr(token)
    return config


@data_app.command("prepare")
@config_options("config_file", "yaml_only", "set_items", "print_config")
def prepare_cmd(
    out: Annotated[str | None, typer.Option("--out", help="Output dir (data.output_dir).")] = None,
    r2e_dataset: Annotated[str | None, typer.Option(help="R2E-Gym hub name or local path.")] = None,
    r2e_split: Annotated[str | None, typer.Option(help="R2E split used for train.")] = None,
    r2e_val_split: Annotated[str | None, typer.Option(help="R2E split used for val.")] = None,
    r2e_val_size: Annotated[int | None, typer.Option(help="Rows carved off the head of train for val.")] = None,
    r2e_limit: Annotated[int | None, typer.Option(help="Max R2E rows read per split.")] = None,
    skip_r2e: Annotated[bool | None, typer.Option("--skip-r2e/--with-r2e", help="Skip R2E-Gym.")] = None,
    swebench_dataset: Annotated[str | None, typer.Option(help="SWE-bench hub name or local path.")] = None,
    swebench_split: Annotated[str | None, typer.Option(help="SWE-bench split.")] = None,
    swebench_limit: Annotated[int | None, typer.Option(help="Max SWE-bench rows.")] = None,
    skip_swebench: Annotated[
        bool | None, typer.Option("--skip-swebench/--with-swebench", help="Skip SWE-bench.")
    ] = None,
    custom: Annotated[str | None, typer.Option("--custom", help="Custom task file (JSON/JSONL/YAML).")] = None,
    repos_dir: Annotated[str | None, typer.Option(help="Local repo trees, <dir>/<repo short name>.")] = None,
    hf_token: Annotated[str | None, typer.Option(help="HF token (default: HF_TOKEN, preferred: a flag shows in `ps` and shell history; never written to disk).")] = None,
    max_steps: Annotated[int | None, typer.Option(help="max_steps written into each task.")] = None,
    r2e_output: Annotated[str | None, typer.Option(
        "--r2e-output", help="Seed 000 spelling: the R2E source dir, <out>/r2e_gym (sets --out to its parent).")]
    = None,
    swebench_output: Annotated[str | None, typer.Option(
        "--swebench-output", help="Seed 000 spelling: the SWE-bench source dir, <out>/swebench.")] = None,
    **options: Any,
) -> None:
    """Load R2E-Gym / SWE-bench / custom tasks, normalise them into TaskRecords and write the prepared dirs."""
    from graph_planner.data.prepare import PrepareError, prepare_datasets
    from graph_planner.data.sources.hf_loader import DataSourceError

    try:
        out = source_outputs_to_out(out, {"r2e_gym": r2e_output, "swebench": swebench_output})
    except ValueError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    params = {**locals(), **options}
    params.pop("r2e_output"), params.pop("swebench_output")
    config = _resolve_config(params, PREPARE_FLAGS)
    import datasets

    datasets.disable_progress_bars()  # one bar per stage below instead of datasets' per-file bars
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done)

        try:
            summary = prepare_datasets(config.data, progress=progress)
        except (PrepareError, DataSourceError) as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            raise typer.Exit(2) from None
    table = Table(title=f"prepared -> {summary.out_dir}")
    for column in ("source", "split", "kept", "rejected", "file"):
        table.add_column(column)
    for source in summary.sources.values():
        for split, counts in source.splits.items():
            table.add_row(source.source, split, str(counts.kept), str(counts.rejected), counts.path or "-")
    out_console.print(table)
    if summary.manifest:
        out_console.print(f"docker manifest: {Path(summary.out_dir) / summary.manifest}", highlight=False)
    if summary.nothing_kept:
        err_console.print(f"[red]error:[/red] no task was kept ({summary.total_rejected} rejected); see the "
                          f"rejected.jsonl files under {summary.out_dir}", highlight=False)
        raise typer.Exit(1)


@data_app.command("register")
@config_options("config_file", "yaml_only", "set_items", "print_config")
def register_cmd(
    inputs: Annotated[list[Path], typer.Argument(help="TaskRecord JSONL files or prepared source dirs.")],
    name: Annotated[str | None, typer.Option(help="Dataset name (data.dataset_name).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Registry dir (default <data.output_dir>/registry).")]
    = None,
    split: Annotated[str | None, typer.Option(help="Register all inputs as this split (default: file stem).")]
    = None,
    rllm_layout: Annotated[bool, typer.Option("--rllm-layout", help="Also write rLLM <split>_verl.parquet.")]
    = False,
    **options: Any,
) -> None:
    """Write verl parquet rows for prepared JSONL (one split per file stem); unchanged input is a no-op."""
    from graph_planner.data.io import NON_SPLIT_FILES, TaskFileError
    from graph_planner.data.registry import RegistrationError, register_dataset

    config = _resolve_config({**locals(), **options}, {"name": "data.dataset_name"})
    registry_dir = out or run_paths(config).registry
    groups: dict[str, list[Path]] = {}
    for item in inputs:
        files = sorted(p for p in item.glob("*.jsonl") if p.name not in NON_SPLIT_FILES) if item.is_dir() else [item]
        if item.is_dir() and not files:
            err_console.print(f"[red]error:[/red] no split JSONL files in {item}", highlight=False)
            raise typer.Exit(2)
        for file in files:
            groups.setdefault(split or file.stem, []).append(file)
    for split_name, files in groups.items():
        try:
            result = register_dataset(files, config.data.dataset_name, registry_dir, split_name, rllm_layout)
        except (RegistrationError, TaskFileError) as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            raise typer.Exit(2) from None
        state = "registered" if result.changed else "unchanged"
        out_console.print(f"{state} {result.name}/{result.split}: {result.rows} rows -> {result.path}"
                          + (f" (+ rLLM {result.rllm_path})" if result.rllm_path else ""), highlight=False)


@data_app.command("manifest")
@config_options("docker_manifest", "config_file", "yaml_only", "set_items", "print_config")
def manifest_cmd(
    dataset_dir: Annotated[Path | None, typer.Argument(help="Prepared dir or JSONL (default data.output_dir).")]
    = None,
    rewrite: Annotated[bool, typer.Option("--rewrite", help="Collect images again, replacing docker_images.txt.")]
    = False,
    **options: Any,
) -> None:
    """Print the docker manifest in use: explicit > <dataset dir>/docker_images.txt > collected and written."""
    from graph_planner.data.io import TaskFileError
    from graph_planner.data.manifest import MANIFEST_NAME, ManifestError, read_manifest, resolve_manifest

    config = _resolve_config({**locals(), **options}, {})
    target = dataset_dir or Path(config.data.output_dir)
    if rewrite:
        (target.parent if target.is_file() else target).joinpath(MANIFEST_NAME).unlink(missing_ok=True)
    try:
        path = resolve_manifest(config.images.manifest, target)
    except (ManifestError, TaskFileError) as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    out_console.print(f"{path} ({len(read_manifest(path))} images)", highlight=False)
