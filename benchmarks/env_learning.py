"""Learning on the real env: does the GRPO phase itself raise the planner's mean reward?

For each seed: the trajectory SFT warm start of configs/experiments/local_learning.yaml (rule-policy episodes of
the bundled training tasks, TRL SFTTrainer on the toy model), then local GRPO with the oracle synthesiser
(a labelled diagnostic: the gold patch only when memory M holds the code it changes), real local sandboxes, real
tests. Only the GRPO steps are in the curve: step 1 is the SFT model's own rollouts.

    .venv/bin/python benchmarks/env_learning.py [--seeds 0 1 2] [--steps 10] [--window 5] [--out-dir runs/benchmarks/env_learning]
    .venv/bin/python benchmarks/env_learning.py --backend verl   # the same on verl (local_verl_learning.yaml, Ray job)
    .venv/bin/python benchmarks/env_learning.py --transfer [--seeds 0 1 2]   # held-out val / test numbers

``--transfer`` runs benchmarks/env_transfer.py instead (configs/experiments/local_transfer.yaml: synthesised bugs
split by code location): base / SFT / GRPO on the held-out val and test tasks and, over seeds, the mean and spread
of the val and test rises (the bundled samples' 2 val tasks cannot say anything about transfer).

Prints one JSON object: per seed the per-step ``reward/mean`` (and std, resolved rate, M recall, grad norm), the
first-5 vs last-5 means and their difference (``rise``), parse error rate at the first and last GRPO step, wall
times; over seeds the mean rise and its spread (min, max, population std).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from graph_planner.config.loader import load_run_config  # noqa: E402  (after the sys.path line)
from graph_planner.env.samples import SAMPLE_DIR  # noqa: E402  (after the sys.path line)
from graph_planner.training.learning_curve import run_learning  # noqa: E402  (after the sys.path line)

CONFIG = ROOT / "configs" / "experiments" / "local_learning.yaml"
#: ``--backend``: the learning config of each engine (same tasks, env, SFT and GRPO settings; only the engine differs)
CONFIGS = {"local": CONFIG, "verl": ROOT / "configs" / "experiments" / "local_verl_learning.yaml"}


def prepare(out_dir: Path) -> Path:
    """The bundled samples prepared with local_learning.yaml's data section (max_steps, val carve-out)."""
    from graph_planner.data.prepare import prepare_datasets

    data = out_dir / "prepared"
    if not (data / "r2e_gym" / "train.jsonl").is_file():
        config = load_run_config(CONFIG, {"data.r2e_dataset": str(SAMPLE_DIR / "r2e" / "train.jsonl"),
                                          "data.swebench_dataset": str(SAMPLE_DIR / "swebench" / "test.jsonl"),
                                          "data.repos_dir": str(SAMPLE_DIR / "repos")})
        prepare_datasets(config.data, out_dir=data)
    return data


def seed_config(out_dir: Path, data: Path, seed: int, steps: int, extra: dict[str, object],
                backend: str = "local"):
    shutil.rmtree(out_dir / "runs" / f"seed{seed}", ignore_errors=True)  # a named run refuses an earlier run's dir
    overrides: dict[str, object] = {
        "experiment.seed": seed, "experiment.run_name": f"seed{seed}", "logging.output_dir": str(out_dir / "runs"),
        "logging.log_backend": "jsonl", "paths.cache_dir": str(out_dir / "cache"),
        "paths.dataset_train": str(data / "r2e_gym" / "train.jsonl"), "paths.data_dir": str(data / "r2e_gym"),
        "training.total_steps": steps, "training.total_epochs": steps,
    }
    if backend == "verl":  # the train API registers <data.output_dir> as parquet for the job
        overrides["data.output_dir"] = str(data)
    overrides.update(extra)
    return load_run_config(CONFIGS[backend], overrides)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=10, help="GRPO steps per seed (the demo runs 10)")
    parser.add_argument("--window", type=int, default=5, help="first-N vs last-N steps")
    parser.add_argument("--backend", choices=sorted(CONFIGS), default="local",
                        help="GRPO engine: local (local_learning.yaml) or verl (local_verl_learning.yaml, a Ray job)")
    parser.add_argument("--out-dir", default=None,
                        help="default runs/benchmarks/env_learning (local) or env_learning_verl (verl)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="extra dotted override of local_learning.yaml, repeatable")
    parser.add_argument("--transfer", action="store_true",
                        help="held-out numbers: run benchmarks/env_transfer.py (local_transfer.yaml) with these seeds, "
                        "steps and overrides")
    args = parser.parse_args(argv)
    if args.transfer:
        import runpy

        transfer = runpy.run_path(str(ROOT / "benchmarks" / "env_transfer.py"))
        return transfer["main"](["--seeds", *map(str, args.seeds), "--steps", str(args.steps),
                                 *(x for item in args.overrides for x in ("--set", item)),
                                 *(["--out-dir", args.out_dir] if args.out_dir else [])])
    from graph_planner.config.loader import parse_set_override

    out_dir = Path(args.out_dir or ROOT / "runs" / "benchmarks" / ("env_learning" if args.backend == "local"
                                                                   else f"env_learning_{args.backend}"))
    extra = dict(parse_set_override(item) for item in args.overrides)
    data = prepare(out_dir)
    with contextlib.redirect_stdout(sys.stderr):  # TRL prints its loss dicts; stdout carries only the JSON
        runs = [run_learning(seed_config(out_dir, data, seed, args.steps, extra, args.backend), window=args.window)
                for seed in args.seeds]
    rises = [r["rise"] for r in runs]
    result = {
        "benchmark": "env_learning",
        "backend": args.backend,
        "config": str(CONFIGS[args.backend].relative_to(ROOT)),
        "overrides": {k: v for k, v in extra.items()},
        "steps": args.steps,
        "window": args.window,
        "seeds": runs,
        "rise_mean": round(statistics.fmean(rises), 4),
        "rise_min": round(min(rises), 4),
        "rise_max": round(max(rises), 4),
        "rise_std": round(statistics.pstdev(rises), 4),
        "seeds_rising": sum(1 for r in rises if r > 0),
        "parse_error_first_mean": round(statistics.fmean(r["parse_error_first"] for r in runs), 4),
        "parse_error_last_mean": round(statistics.fmean(r["parse_error_last"] for r in runs), 4),
        "wall_seconds_total": round(sum(r["wall_seconds"] for r in runs), 2),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
