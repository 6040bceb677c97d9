"""Task synthesis throughput: `graph_planner.synth.synthesize` on the bundled repos with the local backend.

Prints one JSON object: validated tasks per minute (wall clock, the whole job: base runs, mutation, validation,
commits), the share of judged candidates that validate, and the cost per validated task broken down into mutation,
the clean-suite runs (made once per repository and reused; shown amortised) and the mutated-tree runs (summed
over the parallel sandboxes, so it can exceed the wall time per task). The load average is printed beside the rate:
on a shared machine the rate says more about the neighbours than about the code, and only a
run on an idle machine measures the goal.

    .venv/bin/python benchmarks/data_synth.py [--max-tasks 20] [--per-target 2] [--workers N] [--repos a,b]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GOAL_PER_MIN = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tasks", type=int, default=20, help="Validated tasks per repo (stop after).")
    parser.add_argument("--per-target", type=int, default=2)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repos", default="textkit,invcalc,minicfg")
    args = parser.parse_args()

    from graph_planner.synth.synth import SynthOptions, synthesize

    repos = [ROOT / "datasets" / "sample" / "repos" / name for name in args.repos.split(",")]
    load_before = os.getloadavg()
    start = time.monotonic()
    records, _rejected, stats, staging = synthesize(
        repos, SynthOptions(seed=args.seed, per_target=args.per_target, max_tasks=args.max_tasks,
                            workers=args.workers))
    wall = time.monotonic() - start
    shutil.rmtree(staging, ignore_errors=True)
    n = max(1, stats.validated)
    rate = stats.validated / wall * 60
    print(json.dumps({
        "repos": [r.name for r in repos],
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "candidates_made": stats.candidates,
        "candidates_judged": stats.judged,
        "validated": stats.validated,
        # judged candidates that validated (the last window may validate more than --max-tasks keeps)
        "validated_share": round(stats.passed / max(1, stats.judged), 3),
        "discarded": dict(stats.rejected),
        "splits": {s: sum(1 for r in records if r.split == s) for s in ("train", "val", "test")},
        "wall_s": round(wall, 1),
        "validated_per_min": round(rate, 1),
        "goal_per_min": GOAL_PER_MIN,
        "goal_met": rate >= GOAL_PER_MIN,
        "per_task_s": {
            "wall": round(wall / n, 3),
            "mutation": round(stats.mutation_s / n, 4),
            "base_runs_amortised": round(stats.base_run_s / n, 3),
            "base_runs_total": round(stats.base_run_s, 2),
            "coverage_trace_amortised": round(stats.coverage_s / n, 3),
            "mutated_runs": round(stats.mutated_run_s / n, 3),
            "commit": round(stats.commit_s / n, 4),
        },
        "per_judged_candidate_run_s": round(stats.mutated_run_s / max(1, stats.judged), 3),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }, indent=2))


if __name__ == "__main__":
    main()
