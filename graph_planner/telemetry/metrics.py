"""The seed's metric dicts: run layout (``parallel/*``, ``resources/*``), episode batches, verl passthrough.

Episode metrics honour the ``telemetry.*`` switches: ``log_patch_stats`` gates ``patch_*``,
``log_planner_parse_errors`` gates ``planner_parse_error_rate``, ``log_cgm_errors`` gates ``reject/<reason>``.
"""

from __future__ import annotations

import logging
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from graph_planner.config.schema import RunConfig, TelemetryConfig
from graph_planner.episode.turns import Trajectory
from graph_planner.telemetry.scalars import scalar

log = logging.getLogger(__name__)


def parallel_metrics(config: RunConfig) -> dict[str, float]:
    """How the run is laid out (logged once at step 0, as the seed did)."""
    p, r = config.parallel, config.resources
    return {
        "parallel/tensor_parallel_planner": float(p.tensor_parallel_planner),
        "parallel/tensor_parallel_cgm": float(p.tensor_parallel_cgm),
        "parallel/replicas": float(p.replicas),
        "parallel/agents": float(p.parallel_agents),
        "parallel/workers": float(p.rollout_workers),
        "parallel/workflow_parallel": float(p.workflow_parallel),
        "resources/num_gpus": float(r.num_gpus),
        "resources/ray_gpus": float(r.ray_num_gpus),
        "resources/ray_cpus": float(r.ray_num_cpus),
    }


def _patch_stats(trajectory: Trajectory) -> tuple[int, int, Counter[str]]:
    """(generated, applied, rejected-by-reason) from ``trajectory.info["patch_stats"]``; absent = no patches."""
    stats = trajectory.info.get("patch_stats")
    if stats is None:
        return 0, 0, Counter()
    where = f"trajectory {trajectory.task_id!r} info['patch_stats']"
    if not isinstance(stats, Mapping):
        raise TypeError(f"{where}: expected a mapping, got {type(stats).__name__}")
    rejected = stats.get("rejected") or {}
    if not isinstance(rejected, Mapping):
        raise TypeError(f"{where}['rejected']: expected {{reason: count}}, got {rejected!r}")
    try:
        return int(stats.get("generated", 0)), int(stats.get("applied", 0)), Counter(
            {str(reason): int(n) for reason, n in rejected.items()}
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: counts must be integers ({exc})") from None


def episode_metrics(trajectories: Sequence[Trajectory], seconds: float, switches: TelemetryConfig) -> dict[str, float]:
    """Metrics of a batch of finished episodes that took ``seconds`` of wall time.

    - ``reward/mean``, ``reward/std`` (population std) of episode returns; ``episodes``; ``episodes_per_min``.
    - ``patch_success_rate`` = resolved episodes / episodes; ``patch_generated`` / ``patch_applied`` /
      ``patch_rejected`` = synthesised patches summed over the batch (``log_patch_stats``).
    - ``reject/<reason>`` = rejected patches per guard/apply/synthesis reason (``log_cgm_errors``).
    - ``planner_parse_error_rate`` = turns whose output did not parse / all turns (``log_planner_parse_errors``).
    - ``grading/tampered_rate`` = episodes with a graded test run found forged (verdict tampered) / episodes.
    - ``loc/*`` = localisation of the gold patch's code (env/localisation.py): mean recall/precision in memory M
      and working graph W, peak M recall, share of episodes that read a gold node and the mean step it happened
      (episodes of tasks with a gold patch only).
    """
    if seconds <= 0:
        raise ValueError(f"episode_metrics: seconds must be > 0 (wall time of the batch), got {seconds}")
    n = len(trajectories)
    out: dict[str, float] = {"episodes": float(n), "episodes_per_min": n * 60.0 / seconds}
    if n == 0:
        return out
    rewards = [float(t.reward) for t in trajectories]
    out["reward/mean"] = statistics.fmean(rewards)
    out["reward/std"] = statistics.pstdev(rewards)
    out["grading/tampered_rate"] = sum(1 for t in trajectories if t.info.get("tampered")) / n

    generated = applied = 0
    rejected: Counter[str] = Counter()
    for trajectory in trajectories:
        g, a, r = _patch_stats(trajectory)
        generated, applied = generated + g, applied + a
        rejected.update(r)
    if switches.log_patch_stats:
        out["patch_success_rate"] = sum(1 for t in trajectories if t.resolved) / n
        out["patch_generated"] = float(generated)
        out["patch_applied"] = float(applied)
        out["patch_rejected"] = float(sum(rejected.values()))
    if switches.log_cgm_errors:
        for reason, count in sorted(rejected.items()):
            out[f"reject/{reason}"] = float(count)
    if switches.log_planner_parse_errors:
        turns = [turn for t in trajectories for turn in t.turns]
        errors = sum(1 for turn in turns if turn.parse_error)
        out["planner_parse_error_rate"] = errors / len(turns) if turns else 0.0
    out.update(localisation_metrics(t.info.get("localisation") for t in trajectories))
    return out


def localisation_metrics(records: Iterable[dict[str, Any] | None]) -> dict[str, float]:
    """``loc/*`` means of episode localisation records (``info["localisation"]``, env/localisation.py) over the
    episodes that had a gold patch (``loc/episodes`` counts them); {} when none had one."""
    rows = [r for r in records if r]
    if not rows:
        return {}
    n = len(rows)
    out = {f"loc/{key}": sum(float(r.get(key, 0.0)) for r in rows) / n
           for key in ("m_recall", "m_precision", "w_recall", "w_precision", "peak_m_recall")}
    reads = [r["first_gold_read_step"] for r in rows if r.get("first_gold_read_step") is not None]
    out["loc/gold_read_rate"] = len(reads) / n
    if reads:
        out["loc/first_gold_read_step"] = sum(reads) / len(reads)
    out["loc/episodes"] = float(n)
    return out


#: Seed 000 section 5 names -> where the value comes from (local backend name first, then verl's).
#: ``train/value_loss`` exists only when a critic trains (verl adv_estimator=gae); GRPO has no value loss, and a
#: made-up 0 would read as a perfect critic, so it is left out then.
SEED_METRIC_SOURCES: dict[str, tuple[str, ...]] = {
    "train/kl": ("kl", "actor/kl_loss"),
    "train/entropy": ("entropy", "actor/entropy"),
    "train/clipfrac": ("actor/pg_clipfrac",),
    "train/policy_loss": ("pg_loss", "actor/pg_loss"),
    "train/value_loss": ("critic/vf_loss",),
    "train/grad_norm": ("grad_norm", "actor/grad_norm"),
    "lr": ("actor/lr",),
}


def with_seed_names(metrics: Mapping[str, float]) -> dict[str, float]:
    """``metrics`` plus the seed's W&B names (``train/kl``, ``train/entropy``, ...) for the values present."""
    out = dict(metrics)
    for seed_name, sources in SEED_METRIC_SOURCES.items():
        if seed_name in out:
            continue
        for source in sources:
            if source in out:
                out[seed_name] = out[source]
                break
    return out


def passthrough(verl_metrics: Mapping[str, Any]) -> dict[str, float]:
    """verl's metrics under verl's own names, as floats, plus the seed's ``train/*`` names; non-scalar values
    (lists, arrays) are skipped."""
    out: dict[str, float] = {}
    for key, value in verl_metrics.items():
        number = scalar(value)
        if number is not None:
            out[str(key)] = number
        else:
            log.debug("passthrough: skipping non-scalar verl metric %s (%s)", key, type(value).__name__)
    return with_seed_names(out)
