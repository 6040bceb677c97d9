"""The `gp` command. Each subcommand is a thin shell over a library function (no logic here)."""

from __future__ import annotations

import logging

import typer
from rich.console import Console

from graph_planner.cli_help import attach_examples
from graph_planner.config.cli_options import (
    Agent,
    CgmModelPath,
    ConfigFile,
    Dataset,
    DisableCgm,
    DockerManifest,
    ModelPath,
    OutputDir,
    PrepullContainers,
    PrintConfig,
    RunName,
    SandboxBackend,
    Seed,
    SetItems,
    WandbOffline,
    YamlOnly,
    config_from_cli,
)

app = typer.Typer(help="Graph Planner: data, sandboxes, training and evaluation of repair agents.",
                  no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None)  # plain Click help: whole option names at 80 columns (cli_help.py)
console = Console(stderr=True)


@app.callback()
def _main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging.")) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")


@app.command("config")
def config_cmd(
    config_file: ConfigFile = None,
    yaml_only: YamlOnly = False,
    set_items: SetItems = None,
    print_config: PrintConfig = False,
    wandb_offline: WandbOffline = None,
    dataset: Dataset = None,
    model_path: ModelPath = None,
    cgm_model_path: CgmModelPath = None,
    agent: Agent = None,
    docker_manifest: DockerManifest = None,
    prepull_containers: PrepullContainers = None,
    disable_cgm_synthesis: DisableCgm = None,
    run_name: RunName = None,
    output_dir: OutputDir = None,
    seed: Seed = None,
    sandbox: SandboxBackend = None,
) -> None:
    """Resolve the run config (defaults < YAML < CLI), write resolved_config.yaml and print its path."""
    config = config_from_cli(locals(), extra_map={"dataset": "paths.dataset_train"})
    typer.echo(config.resolved_config_path)


@app.command("preflight")
def preflight_cmd(
    config_file: ConfigFile = None,
    yaml_only: YamlOnly = False,
    set_items: SetItems = None,
    print_config: PrintConfig = False,
    wandb_offline: WandbOffline = None,
) -> None:
    """Check the parallelism / resource rules; exit 1 listing every broken rule and the fixes."""
    from graph_planner.config.preflight import preflight_check

    config = config_from_cli(locals(), write=False)
    try:
        report = preflight_check(config)
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from None
    console.print(f"[green]preflight ok[/green]: {report.total_gpus} GPU(s) across "
                  f"{config.resources.num_nodes} node(s), training backend {config.training.backend}")


# --- sub-command groups (one line each; modules own their commands) ---------------------------------------
# (helpers register their typer sub-apps / commands below this line)
from graph_planner.validation.commands import validate_tasks_cmd  # noqa: E402

app.command("validate-tasks")(validate_tasks_cmd)
from graph_planner.data.commands import data_app  # noqa: E402

app.add_typer(data_app, name="data")
from graph_planner.env.codegraph_commands import graph_app  # noqa: E402
from graph_planner.env.commands import smoke_cmd  # noqa: E402
from graph_planner.models.serve import serve_cmd  # noqa: E402

app.command("smoke")(smoke_cmd)
app.add_typer(graph_app, name="graph")
app.command("serve")(serve_cmd)
from graph_planner.sandbox.commands import images_app, sandbox_app  # noqa: E402

app.add_typer(sandbox_app, name="sandbox")
app.add_typer(images_app, name="images")
from graph_planner.eval.commands import eval_cmd  # noqa: E402

app.command("eval")(eval_cmd)
from graph_planner.training.commands import train_cmd  # noqa: E402

app.command("train")(train_cmd)

attach_examples(app)

if __name__ == "__main__":
    app()
