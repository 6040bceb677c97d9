"""``gp sft``: the trajectory SFT warm start as a command (``training.sft.*``); prints the model dir, which
``gp train --model-path`` (``paths.planner_model``) then starts GRPO from."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from graph_planner.config.cli_options import RUN_OPTIONS, config_from_cli, config_options

Source = Annotated[str | None, typer.Option("--source", help="training.sft.source: rule | trajectories.")]
Trajectories = Annotated[str | None, typer.Option(
    "--trajectories", help="training.sft.trajectories_dir: an eval run's trajectories/ dir (source=trajectories).")]
SFTOut = Annotated[str | None, typer.Option("--out", help="training.sft.output_dir (default <run dir>/sft).")]


@config_options(*RUN_OPTIONS)
def sft_cmd(
    source: Source = None,
    trajectories: Trajectories = None,
    out: SFTOut = None,
    **options: Any,
) -> None:
    """Fine-tune the planner on trajectories (TRL SFTTrainer); print the HF model dir for `gp train`."""
    from graph_planner.config.model_paths import model_path_problems
    from graph_planner.training.sft.trainer import run_sft

    config = config_from_cli(
        {**locals(), **options}, extra_map={"dataset": "paths.dataset_train", "source": "training.sft.source",
                                           "trajectories": "training.sft.trajectories_dir",
                                           "out": "training.sft.output_dir"},
        refuse=lambda c: model_path_problems(c, training=True))  # the model it fine-tunes (and an hf synthesiser's)
    try:
        result = run_sft(config, progress=lambda line: typer.echo(line, err=True))  # stdout: the JSON only
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps({"model_dir": str(result.model_dir), "examples": result.examples,
                           "episodes": result.episodes, "episodes_kept": result.episodes_kept,
                           "train_loss": round(result.train_loss, 4), "seconds": result.seconds}))
