"""Transfer: does what SFT and GRPO teach carry to code the planner never trained on?

For each seed, configs/experiments/local_transfer.yaml: the bundled repositories' synthesised bugs split by code
location (datasets/sample/synth), the trajectory SFT warm start on rule-policy episodes of the train split, local
GRPO with the oracle synthesiser (a labelled diagnostic: the gold patch only when memory M holds the code it
changes), then base / SFT / GRPO each playing the HELD-OUT val and test tasks (and train, with ``--with-train``)
through the rollout path (training/learning_report.py). Real local sandboxes, real tests.

    .venv/bin/python benchmarks/env_transfer.py [--seeds 0 1 2] [--steps 10] [--episodes 2] [--set KEY=VALUE ...]
    .venv/bin/python benchmarks/env_transfer.py --seeds 1 2 --sft-dir DIR   # GRPO seeds from one SFT warm start

``--sft-dir`` takes an earlier SFT output (``model/`` + ``sft.json``: ``gp sft --out``, or a seed's
``runs/seed<k>/sft`` copied out of the way, since a seed's run dir is cleared when it starts) instead of fine-tuning
again per seed: the seeds then differ only in the GRPO phase and the comparison's sampling, which isolates what
the RL phase adds, at a fraction of the cost (the SFT is most of a seed's time on 2 cores).

Prints one JSON object: per seed the per-stage, per-split resolved rate, M recall and reward, the GRPO phase's
training-reward curve, and the rises on val and test (GRPO - SFT: what the RL phase added; SFT - base); over seeds
the mean and spread (min, max, population std) of each rise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from graph_planner.config.loader import load_run_config  # noqa: E402  (after the sys.path line)

CONFIG = ROOT / "configs" / "experiments" / "local_transfer.yaml"
METRICS = ("resolved_rate", "loc_m_recall", "reward_mean")
HELD_OUT = ("val", "test")


def prepare(out_dir: Path) -> Path:
    """The synth source of local_transfer.yaml (the committed set, task repositories rebuilt): ``<out>/synth``."""
    import graph_planner.synth  # noqa: F401  (registers the synth source with gp data prepare)
    from graph_planner.data.prepare import prepare_datasets

    data = out_dir / "prepared"
    if not (data / "synth" / "train.jsonl").is_file():
        prepare_datasets(load_run_config(CONFIG).data, out_dir=data)
    return data / "synth"


def seed_config(out_dir: Path, data: Path, seed: int, steps: int, episodes: int, extra: dict[str, object]):
    shutil.rmtree(out_dir / "runs" / f"seed{seed}", ignore_errors=True)  # a named run refuses an earlier run's dir
    overrides: dict[str, object] = {
        "experiment.seed": seed, "experiment.run_name": f"seed{seed}", "logging.output_dir": str(out_dir / "runs"),
        "logging.log_backend": "jsonl", "paths.cache_dir": str(out_dir / "cache"), "paths.data_dir": str(data),
        "paths.dataset_train": str(data / "train.jsonl"), "paths.dataset_val": str(data / "val.jsonl"),
        "paths.dataset_eval": str(data / "test.jsonl"), "training.total_steps": steps,
        "training.total_epochs": steps, "eval.compare_episodes_per_task": episodes,
    }
    overrides.update(extra)
    return load_run_config(CONFIG, overrides)


def rises(rows: dict[str, dict[str, dict[str, float]]], split: str) -> dict[str, float]:
    out = {}
    for metric in METRICS:
        out[f"grpo_minus_sft/{metric}"] = round(rows["grpo"][split][metric] - rows["sft"][split][metric], 4)
        out[f"sft_minus_base/{metric}"] = round(rows["sft"][split][metric] - rows["base"][split][metric], 4)
    return out


def reuse_sft(sft_dir: Path) -> Any:
    """The SFTResult of an earlier SFT output dir (``model/`` + ``sft.json``), or a clear error."""
    from graph_planner.training.sft.trainer import SFTResult

    summary_file, model_dir = sft_dir / "sft.json", sft_dir / "model"
    if not summary_file.is_file() or not (model_dir / "config.json").is_file():
        print(f"--sft-dir {sft_dir}: needs sft.json and model/config.json (an SFT output dir)", file=sys.stderr)
        raise SystemExit(2)
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    return SFTResult(model_dir, int(summary["examples"]), int(summary["episodes"]), int(summary["episodes_kept"]),
                     float(summary["train_loss"]), float(summary["seconds"]))


def run_seed(config: Any, out_dir: Path, with_train: bool, sft_dir: Path | None = None) -> dict[str, Any]:
    from graph_planner.config.checkpoints import final_model
    from graph_planner.training.learning_curve import train_through_api
    from graph_planner.training.learning_report import compare_stages
    from graph_planner.training.sft.trainer import run_sft

    started = time.monotonic()
    sft = reuse_sft(sft_dir) if sft_dir else run_sft(config)
    sft_seconds = time.monotonic() - started
    grpo_config = config.model_copy(deep=True)
    grpo_config.paths.planner_model = str(sft.model_dir)
    grpo_config.training.sft.enabled = False
    # the one train API (gp train's path): it writes the run's resolved_config.yaml, by which the learning report
    # finds the run's metrics.jsonl and reports the GRPO phase's own curve (train_local alone wrote none: null)
    trained = final_model(train_through_api(grpo_config))
    grpo_seconds = time.monotonic() - started - sft_seconds
    assert trained is not None, "GRPO saved no checkpoint"
    splits = {s: getattr(config.paths, f) for s, f in (("val", "dataset_val"), ("test", "dataset_eval"))}
    if with_train:
        splits = {"train": config.paths.dataset_train, **splits}
    stages = {"base": config.paths.planner_model, "sft": str(sft.model_dir), "grpo": str(trained.model_dir)}
    report = compare_stages(config, stages, splits, out_dir / "learning" / f"seed{config.experiment.seed}",
                            config.eval.compare_episodes_per_task)
    return {
        "seed": config.experiment.seed,
        "rows": report["rows"],
        "rise": {split: rises(report["rows"], split) for split in HELD_OUT},
        "grpo_training": report["grpo_training"],
        "sft": {"examples": sft.examples, "episodes_kept": sft.episodes_kept, "episodes": sft.episodes,
                "train_loss": round(sft.train_loss, 4), "reused_from": str(sft_dir) if sft_dir else None,
                "seconds_when_trained": sft.seconds},
        "sft_seconds": round(sft_seconds, 2), "grpo_seconds": round(grpo_seconds, 2),
        "compare_seconds": report["seconds"], "wall_seconds": round(time.monotonic() - started, 2),
    }


def spread(values: list[float]) -> dict[str, float]:
    return {"mean": round(statistics.fmean(values), 4), "min": round(min(values), 4), "max": round(max(values), 4),
            "std": round(statistics.pstdev(values), 4), "positive": sum(1 for v in values if v > 0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=10, help="GRPO steps per seed (the demo runs 10)")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per task and stage in the comparison")
    parser.add_argument("--with-train", action="store_true", help="also play the train split (slower)")
    parser.add_argument("--out-dir", default=str(ROOT / "runs" / "benchmarks" / "env_transfer"))
    parser.add_argument("--sft-dir", type=Path, default=None,
                        help="an earlier SFT output dir (model/ + sft.json) used by every seed instead of a new SFT")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="extra dotted override of local_transfer.yaml, repeatable")
    args = parser.parse_args(argv)
    from graph_planner.config.loader import parse_set_override

    if args.sft_dir:
        reuse_sft(args.sft_dir)  # a bad --sft-dir fails here, before any run dir is cleared
    out_dir = Path(args.out_dir)
    extra = dict(parse_set_override(item) for item in args.overrides)
    data = prepare(out_dir)
    with contextlib.redirect_stdout(sys.stderr):  # TRL prints its loss dicts; stdout carries only the JSON
        runs = []
        for seed in args.seeds:
            runs.append(run_seed(seed_config(out_dir, data, seed, args.steps, args.episodes, extra), out_dir,
                                 args.with_train, args.sft_dir))
            print(json.dumps({"seed_done": runs[-1]}), flush=True)  # on stderr: a long run's seeds survive a stop
    result: dict[str, Any] = {
        "benchmark": "env_transfer", "config": str(CONFIG.relative_to(ROOT)), "overrides": extra,
        "steps": args.steps, "episodes_per_task": args.episodes,
        "sft_dir": str(args.sft_dir) if args.sft_dir else None, "seeds": runs,
        "rise_over_seeds": {split: {key: spread([r["rise"][split][key] for r in runs])
                                    for key in runs[0]["rise"][split]} for split in HELD_OUT},
        "wall_seconds_total": round(sum(r["wall_seconds"] for r in runs), 2),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
