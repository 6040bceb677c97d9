"""The Python steps of scripts/gpu_check.sh (the GPU check, docs/training.md): each prints what it read, appends it
to the facts file as one JSON line, and exits non-zero when the GPU path did not do what it should.

    python3 scripts/gpu_check.py env FACTS
    python3 scripts/gpu_check.py train PRECISION CONFIG FACTS     # `gp train`, local backend, 2 steps, in-process
    python3 scripts/gpu_check.py heartbeat HEARTBEAT_JSON FACTS   # reads benchmarks/gpu_heartbeat.py's output
    python3 scripts/gpu_check.py summary STEPS_JSONL FACTS SUMMARY_JSON FAILED
    python3 scripts/gpu_check.py verl CONFIG FACTS OUT_JSON        # the verl job's entrypoint, 2 steps, NVML sampled
"""

from __future__ import annotations

import importlib.metadata as md
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

VERSIONS = ("torch", "transformers", "tokenizers", "numpy", "pydantic", "typer", "verl", "tensordict", "datasets",
            "nvidia-ml-py", "ray")


def record(facts: str, name: str, value: dict[str, Any]) -> None:
    with open(facts, "a", encoding="utf-8") as f:
        f.write(json.dumps({name: value}) + "\n")
    print(json.dumps({name: value}, indent=1))


def version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def env(facts: str) -> int:
    import torch

    cuda = torch.cuda.is_available()
    record(facts, "env", {
        "python": sys.version.split()[0], "cuda_available": cuda, "torch_cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0) if cuda else None,
        "bf16_supported": cuda and torch.cuda.is_bf16_supported(),
        "versions": {n: version(n) for n in VERSIONS}})
    return 0 if cuda else 1


def train(precision: str, config: str, facts: str) -> int:
    """`gp train -c CONFIG` for 2 steps at PRECISION, recording the trainer's device and the CUDA memory it took."""
    import torch

    from graph_planner.cli import app
    from graph_planner.training.local import trainer as local_trainer

    seen: dict[str, Any] = {}
    init = local_trainer.LocalGRPOTrainer.__init__

    def recording_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        seen.update(device=str(self.device), amp_dtype=str(self.amp_dtype), grad_scaler=self.scaler is not None,
                    param_device=str(next(self.model.parameters()).device), run_dir=str(self.run_dir))

    local_trainer.LocalGRPOTrainer.__init__ = recording_init  # type: ignore[method-assign]
    started = time.perf_counter()
    rc = app(["train", "-c", config, "--run-name", f"gpu-check-train-{precision}", "--set", "training.total_steps=2",
              "--set", f"training.precision={precision}"], standalone_mode=False) or 0
    metrics = Path(seen.get("run_dir", "-"), "metrics.jsonl")
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line] if metrics.is_file() else []
    steps = [r["metrics"] for r in rows if r.get("kind") == "metrics" and "loss" in r.get("metrics", {})]
    keys = ("loss", "grad_norm", "entropy", "step_time_s", "rollout_time_s", "tokens_per_s", "reward/mean")
    result = {
        "rc": rc, "wall_s": round(time.perf_counter() - started, 1), **seen,
        "cuda_max_mem_MB": round(torch.cuda.max_memory_allocated() / 2**20, 1) if torch.cuda.is_available() else 0,
        "steps": len(steps), "last": {k: steps[-1].get(k) for k in keys} if steps else {},
        "finite": bool(steps) and all(math.isfinite(s[k]) for s in steps for k in ("loss", "grad_norm"))}
    record(facts, f"train_{precision}", result)
    ok = rc == 0 and seen.get("device") == "cuda" and result["cuda_max_mem_MB"] > 0 and len(steps) == 2
    return 0 if ok and result["finite"] else 1


#: verl settings of the GPU check that the CPU config does not need: the legacy trainer (the v1 trainer imports
#: transfer_queue, not carried), sdpa attention and padded batches (flash-attn is not on the machine).
VERL_GPU_SETTINGS = {
    "verl_overrides.trainer.use_v1": False,
    "verl_overrides.actor_rollout_ref.model.use_remove_padding": False,
    "verl_overrides.actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
}
#: What the hf rollout server prints when its model is loaded (graph_planner.training.verl.hf_rollout), then its device.
ROLLOUT_DEVICE_LINE = "hf rollout server: model on "
#: verl's per-step numbers the check reports (verl's own names, from its file logger).
VERL_KEYS = ("timing_s/step", "timing_s/gen", "timing_s/update_actor", "timing_s/old_log_prob", "timing_s/ref",
             "critic/score/mean", "actor/pg_loss", "actor/grad_norm", "actor/ppo_kl", "response_length/mean")


class NvmlSampler:
    """Samples the GPU every ``interval`` s in a thread: device memory used and utilisation, and each process's
    memory (peak per process, named by its command line: ray::WorkerDict, ray::HFRolloutServer, ...)."""

    def __init__(self, interval: float = 0.5) -> None:
        import threading

        import pynvml

        pynvml.nvmlInit()
        self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        self.interval, self.stop = interval, threading.Event()
        self.baseline_mb = self._used_mb()
        self.peak_used_mb, self.peak_util, self.samples = self.baseline_mb, 0, 0
        self.per_process: dict[str, float] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _used_mb(self) -> float:
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used / 2**20

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self.samples += 1
            self.peak_used_mb = max(self.peak_used_mb, self._used_mb())
            self.peak_util = max(self.peak_util, self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
            for proc in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
                name = _process_name(proc.pid)
                self.per_process[name] = max(self.per_process.get(name, 0.0), (proc.usedGpuMemory or 0) / 2**20)

    def __enter__(self) -> NvmlSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def result(self) -> dict[str, Any]:
        return {"baseline_used_MB": round(self.baseline_mb), "peak_used_MB": round(self.peak_used_mb),
                "peak_over_baseline_MB": round(self.peak_used_mb - self.baseline_mb), "peak_util_pct": self.peak_util,
                "per_process_peak_MB": {k: round(v) for k, v in sorted(self.per_process.items())},
                "samples": self.samples}


def _process_name(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"pid {pid}"
    text = " ".join(c.decode(errors="replace") for c in cmd if c)
    return (text.split()[0] if text.startswith("ray::") else text[:80]) or f"pid {pid}"


def verl(config_path: str, facts: str, out_json: str) -> int:
    """The verl job's entrypoint (``graph_planner.training.verl.entry``, what the Ray job runs; its ``main_ppo``
    starts Ray on this machine with ``ray.init``) for 2 steps on this GPU, with the project's hf rollout and agent
    loop, NVML sampled meanwhile. Writes step times, memory and verl's metrics to OUT_JSON."""
    import os
    import subprocess

    from graph_planner.config.loader import load_run_config
    from graph_planner.config.paths import run_paths
    from graph_planner.data.prepare import prepare_datasets, register_prepared
    from graph_planner.training.ray.job import job_runtime_env, write_job_config
    from graph_planner.training.verl.config import verl_data_files
    from graph_planner.training.verl.telemetry import VERL_METRICS_FILE

    config = load_run_config(config_path, {"training.total_steps": 2, "experiment.run_name": "gpu-check-verl",
                                           "logging.log_backend": "jsonl", **VERL_GPU_SETTINGS})
    summary = prepare_datasets(config.data)
    for registered in register_prepared(summary.out_dir, config.data.dataset_name):
        print(f"registered {registered.name}/{registered.split}: {registered.rows} rows", flush=True)
    data = verl_data_files(config)
    job_config = write_job_config(config)
    run_dir = run_paths(config).run_dir.resolve()
    env = {**os.environ, **job_runtime_env(config)["env_vars"]}  # what the job's runtime env sets (no VERL_PLATFORM)
    cmd = [sys.executable, "-m", "graph_planner.training.verl.entry", "--config-file", str(job_config),
           "--train-files", data.train, *(["--val-files", data.val] if data.val else [])]
    print("$ " + " ".join(cmd), flush=True)
    started = time.perf_counter()
    rollout_device = None
    with NvmlSampler() as gpu:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:  # the job's log, into gpu_check.log
            print(line, end="", flush=True)
            if ROLLOUT_DEVICE_LINE in line and rollout_device is None:
                rollout_device = line.split(ROLLOUT_DEVICE_LINE, 1)[1].split()[0]
        rc = proc.wait()
    wall = time.perf_counter() - started
    verl_file = run_dir / "verl" / VERL_METRICS_FILE
    rows = [json.loads(line) for line in verl_file.read_text().splitlines() if line] if verl_file.is_file() else []
    steps = [{"step": r.get("step"), **{k: r.get("data", {}).get(k) for k in VERL_KEYS}} for r in rows]
    result = {"rc": rc, "wall_s": round(wall, 1), "steps": steps, "gpu": gpu.result(),
              "rollout_device": rollout_device, "step_time_s": [s["timing_s/step"] for s in steps],
              "run_dir": str(run_dir),
              "checkpoint_hf_model": any(run_dir.glob("checkpoints/global_step_*/actor/huggingface/config.json"))}
    Path(out_json).write_text(json.dumps(result, indent=1))
    record(facts, "verl", {k: v for k, v in result.items() if k != "steps"} | {"steps": len(steps)})
    finite = all(isinstance(s.get("actor/grad_norm"), (int, float)) and math.isfinite(s["actor/grad_norm"])
                 for s in steps)
    used_gpu = gpu.peak_used_mb > gpu.baseline_mb
    ok = rc == 0 and len(steps) == 2 and finite and used_gpu and (rollout_device or "").startswith("cuda")
    return 0 if ok else 1


def heartbeat(path: str, facts: str) -> int:
    """NVML saw a GPU, and its utilisation was higher under the matmul load than idle."""
    data = json.loads(Path(path).read_text())
    record(facts, "heartbeat", {k: v for k, v in data.items() if not k.startswith("samples")})
    load, idle = data.get("gpu_util_load_mean"), data.get("gpu_util_idle_mean")
    return 0 if data.get("nvml") and data.get("gpus", 0) >= 1 and load is not None and load > (idle or 0) else 1


def summary(steps_jsonl: str, facts: str, out: str, failed: str) -> int:
    steps = [json.loads(line) for line in Path(steps_jsonl).read_text().splitlines() if line]
    found: dict[str, Any] = {}
    for line in Path(facts).read_text().splitlines():
        found.update(json.loads(line))
    Path(out).write_text(json.dumps({"failed_steps": int(failed), "seconds": sum(s["s"] for s in steps),
                                     "steps": steps, **found}, indent=1))
    return 0


if __name__ == "__main__":
    commands = {"env": env, "train": train, "heartbeat": heartbeat, "summary": summary, "verl": verl}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    sys.exit(commands[sys.argv[1]](*sys.argv[2:]))
