"""Take N heartbeat samples (GPU util / memory via NVML, Ray resources if asked) and print one JSON object.

With ``--load`` and a CUDA device, the second half of the samples is taken while a matmul loop keeps the GPU busy,
so the figures show the heartbeat seeing real utilisation (``util_ratio_load_vs_idle``). Without a GPU it reports
``nvml: false`` and no gpu figures: that is the expected result on a CPU machine.

    python benchmarks/gpu_heartbeat.py --samples 10 --interval 0.5 --load
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

from graph_planner.telemetry.heartbeat import Heartbeat
from graph_planner.telemetry.trackers import InMemoryTracker


def _busy_gpu(stop: threading.Event) -> None:
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    while not stop.is_set():
        for _ in range(20):
            a = (a @ a).tanh_()
        torch.cuda.synchronize()


def _phase(beat: Heartbeat, samples: int, interval: float) -> tuple[list[dict[str, float]], list[float]]:
    rows, latencies = [], []
    for _ in range(samples):
        started = time.perf_counter()
        rows.append(beat.beat())
        latencies.append((time.perf_counter() - started) * 1000)
        time.sleep(interval)
    return rows, latencies


def _mean(rows: list[dict[str, float]], suffix: str) -> float | None:
    values = [v for row in rows for k, v in row.items() if k.endswith(suffix)]
    return statistics.fmean(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=6, help="samples per phase")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--ray", action="store_true", help="start a local Ray head and sample its resources")
    parser.add_argument("--load", action="store_true", help="also sample while a CUDA matmul loop runs")
    args = parser.parse_args()

    if args.ray:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    beat = Heartbeat(InMemoryTracker(), interval_s=args.interval, log_gpu=True, log_ray=args.ray)
    idle, idle_ms = _phase(beat, args.samples, args.interval)
    result: dict[str, object] = {
        "nvml": beat._nvml is not None,
        "gpus": len(beat._gpu_handles),
        "samples_idle": idle,
        "sample_ms_median": statistics.median(idle_ms),
        "gpu_util_idle_mean": _mean(idle, "/util"),
        "gpu_mem_GB_idle_mean": _mean(idle, "/mem_GB"),
    }
    if args.load:
        import torch

        if torch.cuda.is_available():
            stop = threading.Event()
            worker = threading.Thread(target=_busy_gpu, args=(stop,), daemon=True)
            worker.start()
            time.sleep(1.0)  # let the kernel queue fill
            loaded, _ = _phase(beat, args.samples, args.interval)
            stop.set()
            worker.join(10)
            result["samples_load"] = loaded
            result["gpu_util_load_mean"] = _mean(loaded, "/util")
            result["gpu_mem_GB_load_mean"] = _mean(loaded, "/mem_GB")
            idle_util = result["gpu_util_idle_mean"]
            load_util = result["gpu_util_load_mean"]
            if isinstance(idle_util, float) and isinstance(load_util, float):
                result["util_ratio_load_vs_idle"] = load_util / max(idle_util, 1.0)
        else:
            result["load"] = "skipped: torch.cuda.is_available() is false"
    beat.stop()
    if args.ray:
        ray.shutdown()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
