"""Cost of the grading checks (issue 23: canaries, log integrity, the recorder, bounded output): a graded gold run
of every bundled SWE-bench-shape task with the checks on vs off, interleaved in the SAME sandbox (so both see the
same load and the same warm caches), ``--repeats`` rounds. Prints one JSON object: medians and means of the wall
time and of the CPU time (the grader's own plus every process the run started and reaped: on a loaded machine the
CPU ratio is the steadier measure of what the checks cost), and the ratios on/off (goal: <= 1.05), and
``extra_process_starts``: the programs a graded run starts (successful execve, counted with strace attached to this
process for one run each way per task, untimed) with the checks on less with them off, median over tasks (goal:
<= 1; null without strace). The canaries and the recorder run inside the task's own pytest.

    .venv/bin/python benchmarks/grading_canaries.py [--repeats 3] [--backend local]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


_EXECVE_DONE = re.compile(r"^execve\(.*\) = 0$", re.M)


def _tracer_attached() -> bool:
    status = Path("/proc/self/status").read_text()
    return re.search(r"^TracerPid:\s*0$", status, re.M) is None


def _process_starts(run: Callable[[], object]) -> int | None:
    """Programs started (successful execve) by this process and its descendants while ``run`` runs; None when
    strace is missing or cannot attach here."""
    if shutil.which("strace") is None or _tracer_attached():
        return None
    with tempfile.TemporaryDirectory(prefix="gp-bench-strace-") as tmp:
        # -ff: one file per process, so no execve is split into "unfinished" / "resumed" lines
        tracer = subprocess.Popen(["strace", "-ff", "-qq", "-e", "trace=execve", "-o", str(Path(tmp) / "t"),
                                   "-p", str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not _tracer_attached():
            if tracer.poll() is not None or time.monotonic() > deadline:
                tracer.kill()
                tracer.wait()
                return None
            time.sleep(0.01)
        try:
            run()
        finally:
            tracer.terminate()
            tracer.wait()
        return sum(len(_EXECVE_DONE.findall(trace.read_text())) for trace in Path(tmp).iterdir())


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
    task_ratios: list[float] = []
    starts: dict[str, list[int]] = {"on": [], "off": []}
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
                for mode in ("on", "off"):
                    sandbox.grading_checks = mode == "on"
                    count = _process_starts(sandbox.run_tests)
                    if count is not None:
                        starts[mode].append(count)
                task_on, task_off = [], []
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
                    task_on.append(pair["on"])
                    task_off.append(pair["off"])
                task_ratios.append(statistics.median(task_on) / statistics.median(task_off))
    on, off = statistics.median(samples["on"]), statistics.median(samples["off"])
    result = {
        "backend": args.backend, "isolation": args.isolation, "tasks": len(tasks), "repeats": args.repeats, "runs_each": len(samples["on"]),
        "median_on_s": round(on, 4), "median_off_s": round(off, 4), "ratio_of_medians": round(on / off, 4),
        "median_pair_ratio": round(statistics.median(ratios), 4),
        "median_task_ratio": round(statistics.median(task_ratios), 4),
        "ratio_of_means": round(statistics.fmean(samples["on"]) / statistics.fmean(samples["off"]), 4),
        "mean_on_s": round(statistics.fmean(samples["on"]), 4), "mean_off_s": round(statistics.fmean(samples["off"]), 4),
        "median_cpu_on_s": round(statistics.median(cpu["on"]), 4),
        "median_cpu_off_s": round(statistics.median(cpu["off"]), 4),
        "cpu_ratio_of_medians": round(statistics.median(cpu["on"]) / statistics.median(cpu["off"]), 4),
        "load_average": os.getloadavg()[0], "verdicts": verdicts, "target_ratio": TARGET_RATIO,
        "process_starts_on": starts["on"], "process_starts_off": starts["off"],
        "extra_process_starts": (statistics.median(a - b for a, b in zip(starts["on"], starts["off"], strict=True))
                                 if starts["on"] and len(starts["on"]) == len(starts["off"]) else None),
        "meets_target": on / off <= TARGET_RATIO and statistics.median(ratios) <= TARGET_RATIO,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
