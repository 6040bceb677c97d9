"""How `gp --help` reads: plain Click help (wraps to any width, whole option names at 80 columns, no type badges
on flags) and an Examples block under every command, kept here in one table so a test can check none is missing."""

from __future__ import annotations

import typer

#: Examples per command path ("data prepare"); each line is shown as typed, not re-wrapped.
EXAMPLES: dict[str, list[str]] = {
    "config": ["gp config -c configs/experiments/local_debug.yaml --print-config",
               "gp config -c configs/experiments/planner_8g.yaml --set training.lr=1e-6 --run-name try-lr"],
    "preflight": ["gp preflight -c configs/experiments/local_debug.yaml"],
    "validate-tasks": ["gp validate-tasks prepared/sample/swebench/test.jsonl --sandbox local --limit 3",
                       "gp validate-tasks prepared/sample/swebench --split test --limit 2 --sandbox docker"],
    "grade": ["gp grade --dataset prepared/sample/swebench/test.jsonl --predictions preds.jsonl",
              "gp grade --dataset prepared/sample/swebench/test.jsonl --predictions preds.jsonl --sandbox docker "
              "--report grade.json"],
    "data prepare": ["gp data prepare -c configs/experiments/local_debug.yaml",
                     "gp data prepare --swebench-dataset datasets/sample/swebench/test.jsonl --skip-r2e "
                     "--out prepared/swebench-only"],
    "data register": ["gp data register prepared/sample/r2e_gym --name graph_planner_repoenv --rllm-layout"],
    "data manifest": ["gp data manifest prepared/sample --docker-manifest prepared/sample/docker_images.txt"],
    "data synth": ["gp data synth --repo datasets/sample/repos/textkit --out prepared --max-tasks 5",
                   "gp data synth --repo ../mylib --seed 1 --per-target 3 --val-frac 0.2 --max-tasks 5"],
    "data mine": ["gp data mine --repo ../mylib --out prepared --max-commits 500"],
    "smoke": ["gp smoke --task graphplanner-samples__invcalc-4 --synthesizer gold --require-resolved",
              "gp smoke --sandbox docker --synthesizer none"],
    "serve": ["gp serve --model toy --port 8000",
              "gp serve --model toy --served-model-name planner --dtype bfloat16 --port 8001"],
    "graph build": ["gp graph build datasets/sample/repos/invcalc --out invcalc.graph.json",
                    "gp graph build --task graphplanner-samples__minicfg-3"],
    "graph find": ["gp graph find 'cart add' datasets/sample/repos/invcalc",
                   "gp graph find 'symbol:Money path:invcalc/*' --graph invcalc.graph.json"],
    "graph expand": ["gp graph expand fn:invcalc/cart.py::Cart.add --graph invcalc.graph.json --hop 2"],
    "graph read": ["gp graph read fn:invcalc/cart.py::Cart.add datasets/sample/repos/invcalc --context 2"],
    "sandbox reap": ["gp sandbox reap --dry-run", "gp sandbox reap --run-id 3f2a9c"],
    "images build": ["gp images build prepared/sample"],
    "images prepull": ["gp images prepull --manifest prepared/sample/docker_images.txt --max-workers 8 --retries 3"],
    "eval": ["gp eval -c configs/experiments/local_debug.yaml --set backends.planner_backend=rule --limit 2 "
             "--run-name rule-eval",
             "gp eval -c configs/experiments/local_debug.yaml --model-path runs/try-grpo/checkpoints/step_1/model "
             "--sandbox docker --limit 1 --run-name nightly"],
    "train": ["gp train -c configs/experiments/local_debug.yaml --set training.total_steps=1 --run-name try-grpo",
              "gp train -c configs/experiments/local_debug.yaml --dry-run"],
    "sft": ["gp sft -c configs/experiments/local_debug.yaml --set training.sft.only_resolved=false --out runs/sft-demo",
            "gp sft -c configs/experiments/local_debug.yaml --source trajectories "
            "--trajectories runs/rule-eval/eval/trajectories --set training.sft.only_resolved=false"],
}


def _epilog(lines: list[str]) -> str:
    # "\b" tells Click to keep the following paragraph's line breaks
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


def attach_examples(app: typer.Typer, prefix: str = "") -> None:
    """Set each registered command's (and group's) epilog from EXAMPLES, recursing into sub-apps (`gp data ...`);
    a group shows the examples of its commands."""
    for command in app.registered_commands:
        name = command.name or (command.callback.__name__ if command.callback else "")
        lines = EXAMPLES.get(f"{prefix}{name}")
        if lines and not command.epilog:
            command.epilog = _epilog(lines)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            name = f"{prefix}{group.name} "
            attach_examples(group.typer_instance, name)
            lines = [line for path, examples in EXAMPLES.items() if path.startswith(name) for line in examples]
            if lines and not group.epilog:
                group.epilog = _epilog(lines)
