"""The Python steps of scripts/gpu_check.sh (the GPU check, docs/training.md): each prints what it read, appends it
to the facts file as one JSON line, and exits non-zero when the GPU path did not do what it should.

    python3 scripts/gpu_check.py env FACTS
    python3 scripts/gpu_check.py train PRECISION CONFIG FACTS     # `gp train`, local backend, 2 steps, in-process
    python3 scripts/gpu_check.py heartbeat HEARTBEAT_JSON FACTS   # reads benchmarks/gpu_heartbeat.py's output
    python3 scripts/gpu_check.py summary STEPS_JSONL FACTS SUMMARY_JSON FAILED
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
    commands = {"env": env, "train": train, "heartbeat": heartbeat, "summary": summary}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    sys.exit(commands[sys.argv[1]](*sys.argv[2:]))
