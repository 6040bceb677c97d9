"""Docker sandbox exec round trip: our persistent shell session vs plain docker-py `exec_run`, in the SAME
container, interleaved so both see the same machine load; plus container start times. Prints one JSON object.
Target: session median <= 0.3x exec_run median. Needs a Docker engine (scripts/docker-up.sh; DOCKER_HOST).

    .venv/bin/python benchmarks/sandbox_exec.py [--rounds 200] [--starts 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.sandbox.docker import DockerSandbox, docker_client
from graph_planner.sandbox.images import BASE_IMAGE, build_sample_images

TARGET_RATIO = 0.3
IMAGE = "graph-planner/bench-exec:latest"


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": round(statistics.median(ordered) * 1000, 3),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000, 3),
            "mean_ms": round(statistics.fmean(ordered) * 1000, 3)}


def _task(dataset: Path) -> TaskRecord:
    repo = dataset / "repos" / "bench"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    return TaskRecord(task_id="bench__exec-1", source="custom", split="bench", repo="bench/exec",
                      problem_statement="benchmark", image=IMAGE, repo_path="repos/bench")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="exec round trips per method")
    parser.add_argument("--starts", type=int, default=5, help="container starts measured")
    args = parser.parse_args()
    client = docker_client()
    config = RunConfig.model_validate({"sandbox": {"cpus": 1.0, "memory": "1g"}})
    with tempfile.TemporaryDirectory(prefix="gp-bench-") as tmp:
        task = _task(Path(tmp))
        [build] = build_sample_images([task], tmp, client=client)
        if build.status not in ("built", "cached"):
            print(json.dumps({"error": f"image build failed: {build.reason}"}))
            return 1

        starts, raw_starts = [], []
        for i in range(args.starts):
            began = time.perf_counter()
            with DockerSandbox(task, config.sandbox, tmp, run_id=f"bench-{i}", client=client):
                starts.append(time.perf_counter() - began)
            began = time.perf_counter()
            container = client.containers.run(IMAGE, entrypoint=["sleep", "infinity"], detach=True,
                                              network_disabled=True)
            raw_starts.append(time.perf_counter() - began)
            container.remove(force=True)

        session, plain = [], []
        with DockerSandbox(task, config.sandbox, tmp, run_id="bench-exec", client=client) as sandbox:
            container = sandbox.container
            for _ in range(10):  # warm both paths
                sandbox.exec("true")
                container.exec_run(["true"])
            for _ in range(args.rounds):
                began = time.perf_counter()
                res = sandbox.exec("true")
                session.append(time.perf_counter() - began)
                assert res.rc == 0, res
                began = time.perf_counter()
                out = container.exec_run(["true"])
                plain.append(time.perf_counter() - began)
                assert out.exit_code == 0, out
    ours, theirs = _stats(session), _stats(plain)
    ratio = ours["median_ms"] / theirs["median_ms"]
    print(json.dumps({
        "benchmark": "sandbox_exec",
        "rounds": args.rounds,
        "session_exec": ours,
        "docker_py_exec_run": theirs,
        "ratio_median": round(ratio, 3),
        "ratio_p95": round(ours["p95_ms"] / theirs["p95_ms"], 3),
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio <= TARGET_RATIO,
        "sandbox_start_s": {"median": round(statistics.median(starts), 3), "max": round(max(starts), 3)},
        "raw_container_run_s": {"median": round(statistics.median(raw_starts), 3)},
        "storage_driver": client.info().get("Driver"),
        "base_image": BASE_IMAGE,
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
