"""The `gp` command. Each subcommand is a thin shell over a library function (no logic here)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click
import typer
from rich.console import Console
from typer.core import TyperGroup

from graph_planner.cli_help import attach_examples
from graph_planner.config.cli_options import (
    RUN_OPTIONS,
    config_from_cli,
    config_options,
)


class _Gp(typer.Typer):
    """The typer app; run as the `gp` command (not in a test's CliRunner) it ends on SIGTERM / SIGINT with exit
    143 / 130 and one line (graph_planner.termination)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from graph_planner.termination import Terminated, finish, install

        words = [a for a in sys.argv[1:] if not a.startswith("-")][:1]
        install(" ".join(["gp", *words]))
        try:
            return super().__call__(*args, **kwargs)
        except Terminated as exc:
            finish(exc)


class _DiskErrorsAsExit5(TyperGroup):
    """A full or read-only output disk in any command ends it with one line naming the path and the free space and
    exit 5 (graph_planner.disk), not a traceback and exit 1: the user's disk, not a bug."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as exc:
            from graph_planner.disk import EXIT_DISK, disk_error_line, find_disk_error

            error = find_disk_error(exc)
            if error is None:
                raise
            typer.echo(f"error: {disk_error_line(error)}", err=True)
            raise typer.Exit(EXIT_DISK) from None


app = _Gp(cls=_DiskErrorsAsExit5, help="Graph Planner: data, sandboxes, training and evaluation of repair agents.",
                  no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None)  # plain Click help: whole option names at 80 columns (cli_help.py)
console = Console(stderr=True)


@app.callback()
def _main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging.")) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    from graph_planner.sandbox.reaper import install_exit_cleanup
    install_exit_cleanup()  # from the main thread: sandboxes started later in worker threads are covered


@app.command("config")
@config_options(*RUN_OPTIONS)
def config_cmd(
    **options: Any,
) -> None:
    """Resolve the run config (defaults < YAML < CLI), write resolved_config.yaml and print its path."""
    config = config_from_cli(options, extra_map={"dataset": "paths.dataset_train"})
    typer.echo(config.resolved_config_path)


@app.command("preflight")
@config_options("config_file", "yaml_only", "set_items", "print_config", "wandb_offline")
def preflight_cmd(
    **options: Any,
) -> None:
    """Check the parallelism / resource rules and that the model paths load; exit 1 listing every problem."""
    from graph_planner.config.model_paths import model_path_problems
    from graph_planner.config.preflight import preflight_check

    config = config_from_cli(options, write=False)
    try:
        report = preflight_check(config)
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from None
    from graph_planner.integrations.ray_cluster import training_cluster

    problems = [] if training_cluster(config) else model_path_problems(config, training=True)  # a cluster's own
    if problems:
        typer.echo("preflight failed:\n" + "\n".join(f"  - {p}" for p in problems), err=True)
        raise typer.Exit(1)
    console.print(f"[green]preflight ok[/green]: {report.total_gpus} GPU(s) across "
                  f"{config.resources.num_nodes} node(s), training backend {config.training.backend}")
    if report.colocated:
        console.print(f"planner and CGM share GPU(s) {report.colocated} (co-located by backends.device_map_*)")


# --- sub-command groups (one line each; modules own their commands) ---------------------------------------
# (helpers register their typer sub-apps / commands below this line)
from graph_planner.validation.commands import validate_tasks_cmd  # noqa: E402

app.command("validate-tasks")(validate_tasks_cmd)
from graph_planner.validation.grade_cmd import grade_cmd  # noqa: E402

app.command("grade")(grade_cmd)
from graph_planner.data.commands import data_app  # noqa: E402

app.add_typer(data_app, name="data")
from graph_planner.synth.commands import mine_cmd, synth_cmd  # noqa: E402

data_app.command("synth")(synth_cmd)
data_app.command("mine")(mine_cmd)
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
from graph_planner.training.sft.commands import sft_cmd  # noqa: E402

app.command("sft")(sft_cmd)

attach_examples(app)

if __name__ == "__main__":
    app()
