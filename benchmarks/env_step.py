"""Env step overhead on a bundled sample task (local sandbox, real code graph): the median wall time of the
non-executing actions (find / expand / read / memory ops, observation rendering included; target <= 10 ms), and
a repair cycle split into synthesis / apply (+ syntax check) / tests, with the diagnostic gold synthesiser.

    .venv/bin/python benchmarks/env_step.py [--task ID] [--repeats 50] [--repairs 3]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any

from graph_planner.codegraph import GraphCache
from graph_planner.config.schema import RunConfig
from graph_planner.env.assembly import open_env
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.env.samples import sample_task
from graph_planner.episode.actions import (
    ActionBase,
    ExploreExpand,
    ExploreFind,
    MemoryCommit,
    MemoryDelete,
    Note,
    Read,
    Repair,
)
from graph_planner.models.synthesizers import GoldSynthesizer

TARGET_MS = 10.0


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def step_overheads(env: PlannerEnv, target: str, repeats: int) -> dict[str, float]:
    actions: dict[str, ActionBase] = {
        "explore_find": ExploreFind(query=target.rsplit("::", 1)[-1].split(".")[-1]),
        "explore_expand": ExploreExpand(node_id=target, hop=2),
        "read": Read(node_id=target),
        "memory_commit": MemoryCommit(node_ids=[target]),
        "memory_delete": MemoryDelete(node_ids=[target]),
        "note": Note(text="the slice ignores the ellipsis length"),
    }
    times: dict[str, list[float]] = {name: [] for name in actions}
    env.max_steps = repeats * len(actions) + 10  # these actions run no sandbox operation: no op limit applies
    env.reset()
    for _ in range(repeats):
        for name, action in actions.items():
            started = time.perf_counter()
            env.step(action)
            times[name].append(time.perf_counter() - started)
    return {name: _median_ms(samples) for name, samples in times.items()}


def repair_cycles(env: PlannerEnv, target: str, repairs: int) -> dict[str, Any]:
    split: dict[str, list[float]] = {"synthesis": [], "apply": [], "tests": [], "total": []}
    kept = 0
    for _ in range(repairs):
        env.reset()
        env.step(MemoryCommit(node_ids=[target]))
        started = time.perf_counter()
        result = env.step(Repair(plan="apply the fix", target_node_ids=[target]))
        split["total"].append(time.perf_counter() - started)
        seconds = result.info["repair"]["seconds"]
        for key in ("synthesis", "apply", "tests"):
            split[key].append(seconds.get(key, 0.0))
        kept += result.info["repair"]["status"] == "kept"
    medians = {f"{k}_ms": _median_ms(v) for k, v in split.items()}
    medians["env_overhead_ms"] = round(medians["total_ms"] - medians["synthesis_ms"] - medians["apply_ms"]
                                       - medians["tests_ms"], 3)
    return {**medians, "kept": kept, "repairs": repairs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="graphplanner-samples__textkit-7")
    parser.add_argument("--target", default="fn:textkit/wrap.py::truncate", help="Node the actions use.")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--repairs", type=int, default=3)
    args = parser.parse_args()
    task = sample_task(args.task)
    config = RunConfig()
    with tempfile.TemporaryDirectory() as cache_dir, open_env(task, config, None, "bench-env-step",
                                                            cache=GraphCache(cache_dir),
                                                            synthesizer=GoldSynthesizer(task)) as env:
        started = time.perf_counter()
        env.reset()
        reset_cold = time.perf_counter() - started
        started = time.perf_counter()
        env.reset()
        reset_cached = time.perf_counter() - started
        steps = step_overheads(env, args.target, args.repeats)
        repair = repair_cycles(env, args.target, args.repairs)
        graph_size = {"nodes": len(env.graph.nodes), "files": len(env.graph.files)}
    worst = max(steps.values())
    print(json.dumps({
        "task": task.task_id, "backend": "local", "graph": graph_size, "repeats": args.repeats,
        "reset_ms": {"graph_built": round(reset_cold * 1000, 1), "graph_cached": round(reset_cached * 1000, 1)},
        "step_median_ms": steps, "worst_step_median_ms": worst, "target_ms": TARGET_MS,
        "worst_step_over_target": round(worst / TARGET_MS, 3), "meets_target": worst <= TARGET_MS,
        "repair_cycle": repair,
        "repair_tests_share": round(repair["tests_ms"] / repair["total_ms"], 3) if repair["total_ms"] else None,
    }, indent=2))


if __name__ == "__main__":
    main()
