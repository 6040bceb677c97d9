"""Typer options shared by every `gp` command that takes a run config, and their mapping to dotted keys.

A command takes the shared options with :func:`config_options` (they arrive in its ``**options``) and declares
only its own; it then calls :func:`config_from_cli` with both. Only flags the user actually gave (value is not
None) become overrides, so defaults < YAML < CLI holds, and ``--yaml-only`` can log each ignored name.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_type_hints

import typer

from graph_planner.config.loader import load_run_config, parse_set_override
from graph_planner.config.sandbox_names import SANDBOX_NAMES, canonical_sandbox_name
from graph_planner.config.schema import RunConfig

ConfigFile = Annotated[Path | None, typer.Option("--config-file", "-c", help="Run config YAML.")]
YamlOnly = Annotated[bool, typer.Option("--yaml-only", help="Use only the YAML file (CLI flags are logged, ignored).")]
SetItems = Annotated[
    list[str] | None, typer.Option("--set", help="Dotted override, repeatable: --set training.lr=1e-6")
]
PrintConfig = Annotated[bool, typer.Option("--print-config", help="Print the resolved config and exit.")]
WandbOffline = Annotated[bool | None, typer.Option("--wandb-offline/--wandb-online", help="W&B offline mode.")]
Dataset = Annotated[str | None, typer.Option("--dataset", help="Dataset JSONL or prepared dataset dir.")]
ModelPath = Annotated[str | None, typer.Option("--model-path", help="Planner checkpoint path or 'toy'.")]
CgmModelPath = Annotated[str | None, typer.Option("--cgm-model-path", help="CGM checkpoint / model name.")]
Agent = Annotated[str | None, typer.Option("--agent", help="planner | cgm")]
DockerManifest = Annotated[str | None, typer.Option("--docker-manifest", help="Image manifest file.")]
PrepullContainers = Annotated[bool | None, typer.Option("--prepull-containers/--no-prepull-containers")]
PrepullMaxWorkers = Annotated[int | None, typer.Option("--prepull-max-workers", help="Parallel pulls.")]
PrepullRetries = Annotated[int | None, typer.Option("--prepull-retries", help="Retries per image.")]
PrepullDelay = Annotated[float | None, typer.Option("--prepull-delay", help="Seconds before the first retry.")]
PrepullTimeout = Annotated[float | None, typer.Option("--prepull-timeout", help="Seconds per pull.")]
ValDataset = Annotated[str | None, typer.Option("--val-dataset", help="Validation JSONL (paths.dataset_val).")]
DisableCgm = Annotated[bool | None, typer.Option("--disable-cgm-synthesis/--enable-cgm-synthesis")]
RunName = Annotated[str | None, typer.Option("--run-name", help="Run directory name.")]
OutputDir = Annotated[str | None, typer.Option("--output-dir", help="Root of run directories.")]
Seed = Annotated[int | None, typer.Option("--seed")]


def sandbox_option(value: str) -> str:
    """--sandbox takes the registry's names and aliases (graph_planner/config/sandbox_names.py): an alias becomes
    its name, anything else is refused (exit 2) with every accepted spelling."""
    try:
        return canonical_sandbox_name(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


SandboxBackend = Annotated[str | None, typer.Option(
    "--sandbox", parser=sandbox_option, metavar="|".join(SANDBOX_NAMES),
    help="Every task runs on this backend (CLI > task's backend > backends.sandbox).")]
#: The old name of --sandbox on `gp smoke` / `gp validate-tasks`, kept working but not shown.
SandboxAlias = Annotated[str | None, typer.Option("--backend", hidden=True, parser=sandbox_option,
                                                  help="Old name of --sandbox.")]

F = TypeVar("F", bound=Callable[..., Any])

#: Every shared option: parameter name -> (annotated type, default).
SHARED_OPTIONS: dict[str, tuple[Any, Any]] = {
    "config_file": (ConfigFile, None), "yaml_only": (YamlOnly, False), "set_items": (SetItems, None),
    "print_config": (PrintConfig, False), "wandb_offline": (WandbOffline, None), "dataset": (Dataset, None),
    "model_path": (ModelPath, None), "cgm_model_path": (CgmModelPath, None), "agent": (Agent, None),
    "docker_manifest": (DockerManifest, None), "prepull_containers": (PrepullContainers, None),
    "disable_cgm_synthesis": (DisableCgm, None), "run_name": (RunName, None), "output_dir": (OutputDir, None),
    "seed": (Seed, None), "sandbox": (SandboxBackend, None),
    "prepull_max_workers": (PrepullMaxWorkers, None), "prepull_retries": (PrepullRetries, None),
    "prepull_delay": (PrepullDelay, None), "prepull_timeout": (PrepullTimeout, None),
    "val_dataset": (ValDataset, None),
}
#: The options of a command that reads a config but runs nothing (no run name, model or sandbox).
CONFIG_ONLY = ("config_file", "yaml_only", "set_items", "print_config")
#: The options of a command that runs something: `gp train`, `gp config`.
RUN_OPTIONS = tuple(SHARED_OPTIONS)


def config_options(*names: str) -> Callable[[F], F]:
    """Add the shared options ``names`` to a typer command after its own parameters; their values reach the
    command in ``**options`` (so one list, here, decides every command's run-config flags)."""
    unknown = sorted(set(names) - set(SHARED_OPTIONS))
    if unknown:
        raise ValueError(f"config_options: no shared option {unknown}; known: {sorted(SHARED_OPTIONS)}")

    def decorate(func: F) -> F:
        hints = get_type_hints(func, include_extras=True)
        own = [p.replace(annotation=hints.get(p.name, p.annotation))
               for p in inspect.signature(func).parameters.values() if p.kind is not p.VAR_KEYWORD]
        shared = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=SHARED_OPTIONS[n][1],
                                    annotation=SHARED_OPTIONS[n][0]) for n in names]

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            return func(**kwargs)

        command.__signature__ = inspect.Signature(own + shared)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in own + shared}
        return command  # type: ignore[return-value]

    return decorate


#: CLI parameter name -> dotted config key. ``dataset`` is mapped per command (train vs eval).
FLAG_TO_KEY: dict[str, str] = {
    "model_path": "paths.planner_model",
    "cgm_model_path": "paths.cgm_model",
    "agent": "experiment.agent",
    "docker_manifest": "images.manifest",
    "prepull_containers": "images.prepull",
    "prepull_max_workers": "images.prepull_max_workers",
    "prepull_retries": "images.prepull_retries",
    "prepull_delay": "images.prepull_delay",
    "prepull_timeout": "images.prepull_timeout",
    "val_dataset": "paths.dataset_val",
    "disable_cgm_synthesis": "env.disable_cgm_synthesis",
    "run_name": "experiment.run_name",
    "output_dir": "logging.output_dir",
    "seed": "experiment.seed",
    "sandbox": "backends.sandbox_override",
    "backend": "backends.sandbox_override",
}
#: Parameters that are not config values.
NOT_CONFIG = {"config_file", "yaml_only", "set_items", "print_config", "wandb_offline"}


def cli_overrides(params: Mapping[str, Any], extra_map: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Dotted overrides from the flags a user gave (None = not given); --set items come last and win."""
    mapping = {**FLAG_TO_KEY, **(extra_map or {})}
    overrides: dict[str, Any] = {}
    for name, value in params.items():
        if name in NOT_CONFIG or value is None or name not in mapping:
            continue
        overrides[mapping[name]] = value
    for item in params.get("set_items") or []:
        key, value = parse_set_override(item)
        overrides[key] = value
    return overrides


def config_from_cli(
    params: Mapping[str, Any], extra_map: Mapping[str, str] | None = None, write: bool = True,
    refuse: Callable[[RunConfig], list[str]] | None = None,
) -> RunConfig:
    """Resolve the run config for a command; with --print-config print the YAML and exit 0.

    ``refuse`` lists what makes the command refuse this config (e.g. a model path that does not load): any
    problem exits 2 before the run directory is claimed, so a refused command writes nothing."""
    from graph_planner.config.loader import ConfigError, dump_config_yaml, owned_run
    from graph_planner.config.run_lock import RunLockedError

    write = write and not params.get("print_config")
    try:
        config = load_run_config(
            config_file=params.get("config_file"),
            cli_overrides=cli_overrides(params, extra_map),
            yaml_only=bool(params.get("yaml_only")),
            wandb_offline=params.get("wandb_offline"),
            write=write and refuse is None,
        )
        if params.get("print_config"):
            typer.echo(dump_config_yaml(config), nl=False)
            raise typer.Exit(0)
        problems = refuse(config) if refuse is not None else []
        if problems:
            typer.echo(f"error: {'; '.join(problems)}", err=True)
            raise typer.Exit(2)
        if write and refuse is not None:
            with owned_run(config):  # what load_run_config(write=True) does, once nothing refuses the run
                pass
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except RunLockedError as exc:  # with ``write``: another process owns the run dir; its config stays as it is
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(4) from None
    return config
