"""Learning check of the local GRPO backend: does the toy policy's mean reward rise within 30 CPU steps?

The task is small and learnable without the env: each of a few fixed prompts (token sequences) gets
``group_size`` sampled responses of up to 8 tokens; the reward is 1 when a response contains any token of a
target set (5 % of the vocabulary), else 0. A random policy scores ~0.3; learning shows as a rising curve.
Everything else is the real trainer: toy HF model, verl GRPO advantages and clipped loss, AdamW.

    .venv/bin/python benchmarks/grpo_learning.py [--steps 30] [--out-dir runs/benchmarks/grpo_learning]

Prints one JSON object (the curve, first/last-5 means and their ratio, timings, the PNG path).
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
from graph_planner.episode.turns import Trajectory, Turn  # noqa: E402  (after the sys.path line)
from graph_planner.training.local.trainer import LocalGRPOTrainer  # noqa: E402  (after the sys.path line)

# isort: split
import torch  # noqa: E402 - after graph_planner, whose runtime defaults (OMP_WAIT_POLICY) must precede torch's OpenMP


class PromptTask:
    def __init__(self, i: int) -> None:
        self.task_id = f"prompt-{i}"
        self.ids = [3, 10 + i, 20 + i, 5]


class TargetTokenRollout:
    """Reward 1 when a sampled response contains a token of the target set."""

    def __init__(self, sampling) -> None:
        self.sampling = sampling

    def __call__(self, policy, tasks, group_size):
        target = set(range(100, 100 + len(policy.tokenizer) // 20))
        out = []
        for task, gens in zip(tasks, policy.generate_batch([t.ids for t in tasks], self.sampling, group_size)):
            for gen in gens:
                turn = Turn(prompt_messages=[], response_text=gen.text, action=None, observation="",
                            prompt_token_ids=gen.prompt_ids, response_token_ids=gen.response_ids,
                            response_logprobs=gen.logprobs)
                out.append(Trajectory(task_id=task.task_id, turns=[turn],
                                      reward=1.0 if target & set(gen.response_ids) else 0.0))
        return out


def save_plot(curve: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    window = 5
    smooth = [statistics.fmean(curve[max(0, i - window + 1): i + 1]) for i in range(len(curve))]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps = range(1, len(curve) + 1)
    ax.plot(steps, curve, marker="o", linewidth=1, alpha=0.5, label="reward/mean")
    ax.plot(steps, smooth, linewidth=2, label=f"{window}-step mean")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean reward")
    ax.set_ylim(0, 1.05)
    ax.set_title("Local GRPO on the toy model (CPU)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default=str(ROOT / "runs" / "benchmarks" / "grpo_learning"))
    args = parser.parse_args()
    torch.set_num_threads(1)  # a 64-wide model: thread hand-offs cost more than they save
    out = Path(args.out_dir)
    config = load_run_config(None, {
        "experiment.run_name": "grpo_learning", "experiment.seed": args.seed, "logging.output_dir": str(out),
        "logging.save_interval": 10_000, "paths.cache_dir": str(ROOT / ".cache" / "graph_planner"),
        "training.total_steps": args.steps, "training.total_epochs": 10_000, "training.train_batch_size": 4,
        "training.ppo_mini_batch_size": 4, "training.group_size": 8, "training.lr": 3e-3,
        "planner_sampling.temperature": 1.0, "planner_sampling.top_p": 1.0, "planner_sampling.max_new_tokens": 8,
        "env.env_groups": 4,
    })
    tasks = [PromptTask(i) for i in range(6)]
    trainer = LocalGRPOTrainer(config, TargetTokenRollout(config.planner_sampling), tasks)
    start = time.perf_counter()
    history = trainer.train()
    seconds = time.perf_counter() - start
    curve = [round(m["reward/mean"], 4) for m in history]
    first, last = statistics.fmean(curve[:5]), statistics.fmean(curve[-5:])
    out.mkdir(parents=True, exist_ok=True)
    png = out / "reward_curve.png"
    save_plot(curve, png)
    print(json.dumps({
        "benchmark": "grpo_learning", "steps": len(curve), "device": str(trainer.device),
        "reward_curve": curve, "first5_mean": round(first, 4), "last5_mean": round(last, 4),
        "last5_over_first5": round(last / first, 3) if first > 0 else None, "rose": last > first,
        "entropy_first": round(history[0]["entropy"], 4), "entropy_last": round(history[-1]["entropy"], 4),
        "seconds": round(seconds, 1), "s_per_step": round(seconds / len(curve), 2), "png": str(png),
    }))


if __name__ == "__main__":
    main()
