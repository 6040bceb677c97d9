"""Cost of the grading checks (issue 23: canaries, log integrity, the recorder, bounded output): a graded gold run
of every bundled SWE-bench-shape task with the checks on vs off, interleaved in the SAME sandbox (so both see the
same load and the same warm caches), ``--repeats`` rounds. Prints one JSON object: medians and means of the wall
time and of the CPU time (the grader's own plus every process the run started and reaped: on a loaded machine the
CPU ratio is the steadier measure of what the checks cost), and the ratios on/off (goal: <= 1.05; the checks start
no extra process: the canaries and the recorder run inside the task's own pytest).

    .venv/bin/python benchmarks/grading_canaries.py [--repeats 3] [--backend local]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from graph_planner.config.schema import DataConfig, RunConfig
from graph_planner.data.io import read_task_records
from graph_planner.data.prepare import prepare_datasets
from graph_planner.sandbox.factory import make_sandbox

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "sample"
TARGET_RATIO = 1.05


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the bundled tasks")
    parser.add_argument("--backend", default="local", choices=["local", "docker"])
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    parser.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "netns", "none"],
                        help="sandbox.local_isolation; the CPU time of processes under bwrap's own pid namespace is "
                             "not reported back to this process, so CPU ratios need netns/none")
    args = parser.parse_args()
    config = RunConfig.model_validate({"backends": {"sandbox": args.backend},
                                       "sandbox": {"local_isolation": args.isolation}})
    samples: dict[str, list[float]] = {"on": [], "off": []}
    cpu: dict[str, list[float]] = {"on": [], "off": []}
    ratios: list[float] = []
    verdicts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="gp-bench-canary-") as tmp:
        prepare_datasets(DataConfig(output_dir=tmp, swebench_dataset=str(SAMPLE / "swebench"),
                                    repos_dir=str(SAMPLE / "repos"), r2e_dataset=str(SAMPLE / "r2e")))
        dataset = Path(tmp) / "swebench" / "test.jsonl"
        tasks = read_task_records(dataset)[:args.limit]
        for task in tasks:
            with make_sandbox(task, config, dataset.parent, run_id="bench-canary") as sandbox:  # type: ignore[attr-defined]
                sandbox.apply_patch(task.gold_patch or "")
                sandbox.run_tests()  # warm-up (first imports, page cache)
                for round_no in range(args.repeats):
                    pair = {}
                    for mode in (("on", "off") if round_no % 2 == 0 else ("off", "on")):
                        sandbox.grading_checks = mode == "on"
                        start, cpu_start = time.perf_counter(), _cpu()
                        report = sandbox.run_tests()
                        pair[mode] = time.perf_counter() - start
                        samples[mode].append(pair[mode])
                        cpu[mode].append(_cpu() - cpu_start)
                        verdicts[f"{mode}:{report.verdict}"] = verdicts.get(f"{mode}:{report.verdict}", 0) + 1
                    ratios.append(pair["on"] / pair["off"])
    on, off = statistics.median(samples["on"]), statistics.median(samples["off"])
    result = {
        "backend": args.backend, "isolation": args.isolation, "tasks": len(tasks), "repeats": args.repeats, "runs_each": len(samples["on"]),
        "median_on_s": round(on, 4), "median_off_s": round(off, 4), "ratio_of_medians": round(on / off, 4),
        "median_pair_ratio": round(statistics.median(ratios), 4),
        "mean_on_s": round(statistics.fmean(samples["on"]), 4), "mean_off_s": round(statistics.fmean(samples["off"]), 4),
        "median_cpu_on_s": round(statistics.median(cpu["on"]), 4),
        "median_cpu_off_s": round(statistics.median(cpu["off"]), 4),
        "cpu_ratio_of_medians": round(statistics.median(cpu["on"]) / statistics.median(cpu["off"]), 4),
        "load_average": os.getloadavg()[0], "verdicts": verdicts, "target_ratio": TARGET_RATIO,
        "meets_target": on / off <= TARGET_RATIO,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
