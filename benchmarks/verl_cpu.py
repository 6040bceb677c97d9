"""Step time of the verl backend vs the local backend on the same toy config, in one run, and verl's start-up.

Both train ``configs/experiments/local_verl.yaml`` (bundled tasks, local sandbox, toy model, same batch, group,
lengths and env) for ``--steps`` GRPO steps from scratch:

- ``local``: ``training.backend=local`` in this process (``train_local``); step time = the trainer's
  ``step_time_s`` (rollout + update);
- ``verl``: the real verl job (``run_training_job``: private Ray head, job submission, main_ppo with FSDP2, the
  GraphPlannerAgentLoop, hf rollout on the cpu platform); step time = verl's ``timing_s/step``.

Start-up of the verl path = wall time of the whole job minus its steps (Ray head, job runtime env, TaskRunner,
FSDP workers, rollout server, agent-loop workers, model loads, checkpoint saves, shutdown); the head's own start
is reported apart. Compare the ratio only within one run (the machine is shared).

    .venv/bin/python benchmarks/verl_cpu.py [--steps 2] [--out-dir runs/benchmarks/verl_cpu]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from graph_planner.config.loader import load_run_config  # noqa: E402  (after the sys.path line)
from graph_planner.telemetry.trackers import read_step_metrics  # noqa: E402  (after the sys.path line)

CONFIG = ROOT / "configs" / "experiments" / "local_verl.yaml"


def step_series(metrics_file: Path, key: str) -> list[float]:
    """``key`` of every step >= 1 in a run's metrics.jsonl (the JSONL tracker)."""
    return [float(m[key]) for m in read_step_metrics(metrics_file).values() if key in m]


def overrides(out_dir: Path, backend: str, steps: int) -> dict[str, object]:
    # unnamed: each benchmark run trains from scratch in its own runs/bench_<backend>-<UTC stamp>/
    return {"training.backend": backend, "training.total_steps": steps, "experiment.run_name": None,
            "experiment.name": f"bench_{backend}",
            "logging.output_dir": str(out_dir / "runs"), "data.output_dir": str(out_dir / "prepared"),
            "telemetry.log_ray": False}


def prepare(out_dir: Path, steps: int) -> None:
    from graph_planner.data.prepare import prepare_datasets, register_prepared

    config = load_run_config(CONFIG, overrides(out_dir, "verl", steps))
    register_prepared(prepare_datasets(config.data).out_dir, config.data.dataset_name)


def run_local(out_dir: Path, steps: int) -> dict[str, object]:
    from graph_planner.training.api import train

    config = load_run_config(CONFIG, overrides(out_dir, "local", steps), write=True)
    started = time.monotonic()
    outcome = train(config)
    wall = time.monotonic() - started
    if not outcome.ok:
        raise SystemExit(f"local training failed: {outcome.message}")
    times = step_series(outcome.run_dir / "metrics.jsonl", "step_time_s")
    return {"steps": outcome.steps_done, "step_s": [round(t, 3) for t in times],
            "step_s_mean": round(statistics.fmean(times), 3), "wall_s": round(wall, 1)}


def run_verl(out_dir: Path, steps: int) -> dict[str, object]:
    from graph_planner.training.api import train

    config = load_run_config(CONFIG, overrides(out_dir, "verl", steps), write=True)
    started = time.monotonic()
    outcome = train(config)  # the registered train/val parquet of prepare(), as `gp train` gives them
    wall = time.monotonic() - started
    if not outcome.ok:
        raise SystemExit(f"verl job failed: {outcome.message}")
    metrics = outcome.run_dir / "metrics.jsonl"
    times = step_series(metrics, "timing_s/step")
    gen = step_series(metrics, "timing_s/gen")
    update = step_series(metrics, "timing_s/update_actor")
    return {"steps": len(times), "job_id": outcome.job_id, "step_s": [round(t, 3) for t in times],
            "step_s_mean": round(statistics.fmean(times), 3), "gen_s_mean": round(statistics.fmean(gen), 3),
            "update_actor_s_mean": round(statistics.fmean(update), 3), "wall_s": round(wall, 1),
            "head_start_s": round(outcome.head_start_s, 1), "startup_s": round(wall - sum(times), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/verl_cpu.py", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--out-dir", default=str(ROOT / "runs" / "benchmarks" / "verl_cpu"))
    args = parser.parse_args(argv)
    out_dir = Path(args.out_dir).resolve()
    prepare(out_dir, args.steps)
    local = run_local(out_dir, args.steps)
    verl = run_verl(out_dir, args.steps)
    print(json.dumps({
        "config": str(CONFIG.relative_to(ROOT)), "steps": args.steps, "local": local, "verl": verl,
        "step_time_ratio_verl_over_local": round(float(verl["step_s_mean"]) / float(local["step_s_mean"]), 2),
        "verl_wall_over_local_wall": round(float(verl["wall_s"]) / float(local["wall_s"]), 2),
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
