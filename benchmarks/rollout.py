"""Rollout throughput: episodes per minute of the rule policy on the bundled sample tasks for 1, 2 and 4 concurrent
local sandboxes. Prints one JSON object; speed-ups are ratios against N=1 in the same run.

Target: speed-up(N) >= 0.7 x min(N, cores). Usage: python benchmarks/rollout.py [--episodes 8] [--synthesizer gold]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from graph_planner.config import load_run_config
from graph_planner.env.samples import LOCAL_DEBUG_CONFIG, prepare_bundled_samples
from graph_planner.eval.episode import build_episode_fn
from graph_planner.eval.runner import iter_local


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=8, help="episodes per concurrency level")
    parser.add_argument("--levels", default="1,2,4")
    parser.add_argument("--synthesizer", default="gold", help="gold exercises apply+tests; none skips them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_run_config(LOCAL_DEBUG_CONFIG, {
            "backends.planner_backend": "rule", "backends.cgm_backend": args.synthesizer,
            "paths.cache_dir": str(Path(tmp) / "cache"), "logging.output_dir": tmp,
        })
        dataset_dir = prepare_bundled_samples(Path(tmp) / "prepared") / "swebench"
        from graph_planner.data.io import read_task_records

        tasks = read_task_records(dataset_dir / "test.jsonl")
        batch = [tasks[i % len(tasks)] for i in range(args.episodes)]
        episode = build_episode_fn(cfg, dataset_dir, "bench-rollout")
        episode(batch[0])  # warm the graph cache and imports so N=1 is not penalised
        levels: dict[str, dict[str, float]] = {}
        for n in (int(x) for x in args.levels.split(",")):
            start = time.perf_counter()
            results = list(iter_local(batch, episode, n))
            seconds = time.perf_counter() - start
            levels[str(n)] = {"seconds": round(seconds, 2), "episodes": len(results),
                              "episodes_per_min": round(60 * len(results) / seconds, 2),
                              "resolved": sum(r.resolved for r in results)}
    base = levels[next(iter(levels))]["episodes_per_min"]
    cores = os.cpu_count() or 1
    for n, row in levels.items():
        row["speedup"] = round(row["episodes_per_min"] / base, 3)
        row["target_speedup"] = round(0.7 * min(int(n), cores), 3)
        row["meets_target"] = row["speedup"] >= row["target_speedup"]
    print(json.dumps({"benchmark": "rollout", "policy": "rule", "synthesizer": args.synthesizer,
                      "cores": cores, "levels": levels}, indent=2))


if __name__ == "__main__":
    main()
