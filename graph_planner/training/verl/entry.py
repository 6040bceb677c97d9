"""Entrypoint of the verl training Ray job: ``python -m graph_planner.training.verl.entry --config-file RESOLVED.yaml``.

``--dry-run`` checks what a GPU run would need first, then exits 0 (or 1 naming every problem): the resolved
config loads, the parquet data files exist with verl's columns, the agent-loop class imports and is a verl
``AgentLoopBase``, and the translated overrides compose against the installed verl's Hydra config.
Without ``--dry-run`` it runs verl's ``main_ppo`` with the translated overrides *in this process* (what
``python -m verl.trainer.main_ppo <overrides>`` runs, without a second process paying its own ``import verl``) and
exits with its code.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import runpy
import sys
from pathlib import Path

import yaml

from graph_planner.config.loader import ConfigError, load_run_config
from graph_planner.config.paths import run_paths
from graph_planner.config.schema import RunConfig
from graph_planner.models.toy import resolve_model_path
from graph_planner.training.verl.config import (
    AGENT_LOOP_NAME,
    VerlDataPaths,
    build_verl_overrides,
    verl_config_dir,
    verl_data_files,
)

#: The Graph Planner agent loop (``AgentLoopBase`` subclass) registered for verl.
DEFAULT_AGENT_LOOP = "graph_planner.training.verl.agent_loop:GraphPlannerAgentLoop"
#: Columns verl's RLHFDataset and our agent loop read from every row.
REQUIRED_COLUMNS = ("data_source", "prompt")


def check_data_file(path: str, split: str) -> tuple[int | None, str | None]:
    """(rows, problem) for one parquet file."""
    import pyarrow.parquet as pq

    if not Path(path).is_file():
        return None, f"{split} data {path}: no such file (run `gp data register`, or pass --{split}-files)"
    try:
        meta = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid and friends for non-parquet files
        return None, f"{split} data {path}: not a parquet file ({exc})"
    missing = [c for c in REQUIRED_COLUMNS if c not in meta.schema_arrow.names]
    if missing:
        return None, f"{split} data {path}: missing verl column(s) {missing}"
    return meta.metadata.num_rows, None


def check_agent_loop(target: str) -> str | None:
    """Problem text, or None when ``module:Class`` imports and subclasses verl's AgentLoopBase."""
    module_name, _, class_name = target.partition(":")
    if not class_name:
        return f"--agent-loop {target!r}: expected module:Class"
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        return f"agent loop {target}: cannot import ({exc})"
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase

    if not (isinstance(cls, type) and issubclass(cls, AgentLoopBase)):
        return f"agent loop {target}: not a subclass of verl's AgentLoopBase"
    return None


def compose_verl_config(overrides: list[str]):  # -> DictConfig
    """Compose verl's ``ppo_trainer`` config with the overrides (unknown keys / bad values raise)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def agent_loop_yaml(run_dir: Path, target: str, run_config_path: str | Path) -> Path:
    """The agent-loop registry file verl's workers load (``rollout.agent.agent_loop_config_path``).

    The Graph Planner loop writes its own entries (every row agent name, each with ``run_config_path``); any
    other ``module:Class`` is registered under :data:`AGENT_LOOP_NAME` with the same ``run_config_path`` kwarg.
    """
    path = run_dir / "verl" / "agent_loops.yaml"
    if target == DEFAULT_AGENT_LOOP:
        from graph_planner.training.verl.agent_loop import write_agent_loop_config

        return write_agent_loop_config(path, run_config_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module_name, _, class_name = target.partition(":")
    entry = {"name": AGENT_LOOP_NAME, "_target_": f"{module_name}.{class_name}",
             "run_config_path": str(Path(run_config_path).resolve())}
    path.write_text(yaml.safe_dump([entry], sort_keys=False), encoding="utf-8")
    return path


def platform_overrides(cpu: bool) -> dict[str, object]:
    """The CPU path's verl overrides (``--cpu``: the job runs on a GPU-less local head), else none."""
    if not cpu:
        return {}
    from graph_planner.training.verl.cpu import cpu_hydra_overrides

    return cpu_hydra_overrides()


def run(config: RunConfig, config_path: str, data: VerlDataPaths, agent_loop: str, dry_run: bool,
        cpu: bool = False) -> int:
    run_dir = run_paths(config).run_dir.resolve()
    problems: list[str] = []
    rows = {}
    for split, path in (("train", data.train), ("val", data.val)):
        if path:
            rows[split], problem = check_data_file(path, split)
            if problem:
                problems.append(problem)
    problem = check_agent_loop(agent_loop)
    if problem:
        problems.append(problem)
    loop_yaml = run_dir / "verl" / "agent_loops.yaml"
    try:
        overrides = build_verl_overrides(config, data, run_dir, loop_yaml, platform_overrides(cpu))
        compose_verl_config(overrides)
    except Exception as exc:  # noqa: BLE001 - translation / Hydra errors, reported with the rest
        problems.append(f"verl config: {exc}")
        overrides = []
    if problems:
        print("verl job preflight failed:\n" + "\n".join(f"  - {p}" for p in problems), file=sys.stderr, flush=True)
        return 1
    if dry_run:
        print(json.dumps({"dry_run": "ok", "run_name": config.run_name, "data_rows": rows, "agent_loop": agent_loop,
                          "overrides": len(overrides)}), flush=True)
        return 0
    agent_loop_yaml(run_dir, agent_loop, config_path)
    if config.paths.planner_model == "toy":
        config.paths.planner_model = resolve_model_path("toy", config.paths.cache_dir)
    if config.training.attention_window:  # actor, reference and rollout all load this dir
        from graph_planner.models.attention_window import windowed_model_dir

        config.paths.planner_model = str(windowed_model_dir(
            config.paths.planner_model, config.training.attention_window, run_dir / "verl" / "windowed_model"))
    overrides = build_verl_overrides(config, data, run_dir, loop_yaml, platform_overrides(cpu))
    return run_main_ppo(config, run_dir, overrides)


#: verl's PPO entry module, run as ``__main__`` (its Hydra ``main``) by :func:`run_main_ppo`.
MAIN_PPO_MODULE = "verl.trainer.main_ppo"


def run_main_ppo(config: RunConfig, run_dir: Path, overrides: list[str]) -> int:
    """verl's ``main_ppo <overrides>`` in this process, with the telemetry bridge following it (seed metric names
    and verl's into the run's trackers); returns main_ppo's exit code.

    The module runs as ``__main__`` with ``sys.argv`` set, exactly as ``python -m verl.trainer.main_ppo`` would:
    its Hydra ``main`` composes the config, and ``ray.init`` attaches to the job's cluster (``RAY_ADDRESS``,
    verl's own runtime env and actor logs printed here, in the job log). A failure exits 1 through Hydra, which
    prints the error first; ``verl`` is already imported here (the agent-loop check), so no second process pays
    for it.
    """
    from graph_planner.training.verl.telemetry import VERL_METRICS_FILE, VerlTelemetryBridge

    os.environ.setdefault("VERL_FILE_LOGGER_PATH", str(run_dir / "verl" / VERL_METRICS_FILE))  # the job's wins
    with VerlTelemetryBridge(config, run_dir):
        return _run_module_as_main(MAIN_PPO_MODULE, overrides)


def _run_module_as_main(module: str, args: list[str]) -> int:
    """``python -m module *args`` in this process: its exit code (``SystemExit``'s, 0 when it returns)."""
    saved = sys.argv
    sys.argv = [module, *args]  # argv[0] becomes the module's file, as with ``python -m``
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr, flush=True)  # sys.exit("message"), as the interpreter reports it
        return 1
    finally:
        sys.argv = saved
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graph_planner.training.verl.entry", description=__doc__)
    parser.add_argument("--config-file", required=True, help="resolved_config.yaml of the run")
    parser.add_argument("--train-files", help="train parquet (default <data.output_dir>/registry/<dataset_name>/train.parquet)")
    parser.add_argument("--val-files", help="val parquet (default: val.parquet beside the train file, when it exists)")
    parser.add_argument("--agent-loop", default=DEFAULT_AGENT_LOOP, help="module:Class of the verl agent loop")
    parser.add_argument("--dry-run", action="store_true", help="validate config, data and agent loop; no training")
    parser.add_argument("--cpu", action="store_true",
                        help="GPU-less head: verl's cpu platform and hf rollout (graph_planner.training.verl.cpu)")
    args = parser.parse_args(argv)
    try:
        config = load_run_config(args.config_file, yaml_only=True)
    except ConfigError as exc:
        print(f"verl job preflight failed:\n  - {exc}", file=sys.stderr, flush=True)
        return 1
    try:
        data = verl_data_files(config, args.train_files, args.val_files)
    except FileNotFoundError as exc:
        print(f"verl job preflight failed:\n  - {exc}", file=sys.stderr, flush=True)
        return 1
    return run(config, args.config_file, data, args.agent_loop, args.dry_run, cpu=args.cpu)


if __name__ == "__main__":
    sys.exit(main())
