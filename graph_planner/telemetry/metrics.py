"""The seed's metric dicts: run layout (``parallel/*``, ``resources/*``), episode batches, verl passthrough.

Episode metrics honour the ``telemetry.*`` switches: ``log_patch_stats`` gates ``patch_*``,
``log_planner_parse_errors`` gates ``planner_parse_error_rate``, ``log_cgm_errors`` gates ``reject/<reason>``.
"""

from __future__ import annotations

import logging
import statistics
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from graph_planner.config.schema import RunConfig, TelemetryConfig
from graph_planner.episode.summary import EpisodeSummary
from graph_planner.episode.turns import Trajectory
from graph_planner.telemetry.scalars import scalar

log = logging.getLogger(__name__)
#: Returns closer than this are equal for ``reward/frac_zero_std`` (step rewards are rounded to 1e-6).
_EQUAL = 1e-9


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


Episode = EpisodeSummary | Trajectory


def summaries_of(episodes: Iterable[Episode]) -> list[EpisodeSummary]:
    """The env's summaries of ``episodes`` (a Trajectory carries its summary in ``info``)."""
    return [e if isinstance(e, EpisodeSummary) else e.summary for e in episodes]


def reward_metrics(episodes: Sequence[Episode], groups: Sequence[Hashable] | None = None) -> dict[str, float]:
    """``reward/*`` of a batch of episodes, the one definition both engines log.

    - ``reward/mean|max|min`` of the episode returns; ``reward/std`` their **population** standard deviation
      (divide by n: the spread of this batch, 0 for one episode; numpy's / verl's default, not torch's n-1);
    - ``reward/resolved_rate``: resolved episodes / episodes;
    - ``reward/frac_zero_std``: the share of GRPO groups (``groups[i]`` names episode i's group; default: its
      task) whose returns are all equal. Such a group has advantage 0 everywhere and teaches nothing (TRL's
      ``frac_reward_zero_std``); a group of one counts as zero-std.
    """
    summaries = summaries_of(episodes)
    if not summaries:
        return {}
    if groups is not None and len(groups) != len(summaries):
        raise ValueError(f"reward_metrics: {len(groups)} group ids for {len(summaries)} episodes")
    rewards = [s.episode_return for s in summaries]
    by_group: dict[Hashable, list[float]] = defaultdict(list)
    for key, reward in zip(groups if groups is not None else [s.task_id for s in summaries], rewards):
        by_group[key].append(reward)
    flat = sum(1 for values in by_group.values() if max(values) - min(values) <= _EQUAL)
    return {
        "reward/mean": statistics.fmean(rewards), "reward/std": statistics.pstdev(rewards),
        "reward/max": max(rewards), "reward/min": min(rewards),
        "reward/resolved_rate": sum(1 for s in summaries if s.resolved) / len(summaries),
        "reward/frac_zero_std": flat / len(by_group),
    }


def episode_metrics(episodes: Sequence[Episode], seconds: float, switches: TelemetryConfig,
                    groups: Sequence[Hashable] | None = None) -> dict[str, float]:
    """Metrics of a batch of finished episodes that took ``seconds`` of wall time; both training engines log
    this dict (the local trainer per step, verl's telemetry bridge per step from the workers' records).

    - ``reward/*`` (:func:`reward_metrics`; ``groups`` as there); ``episodes``; ``episodes_per_min``.
    - ``completions/clipped_ratio`` = model responses cut at the response length limit / all turns (TRL's name).
    - ``grading/tampered_rate`` = episodes with a graded test run found forged (verdict tampered) / episodes.
    - ``patch_success_rate`` = resolved episodes / episodes; ``patch_generated`` / ``patch_applied`` /
      ``patch_rejected`` = synthesised patches summed over the batch (``log_patch_stats``).
    - ``reject/<reason>`` = rejected patches per guard/apply/synthesis reason (``log_cgm_errors``).
    - ``planner_parse_error_rate`` = turns whose output did not parse / all turns (``log_planner_parse_errors``).
    - ``loc/*`` = localisation of the gold patch's code (:func:`localisation_metrics`).
    """
    if seconds <= 0:
        raise ValueError(f"episode_metrics: seconds must be > 0 (wall time of the batch), got {seconds}")
    summaries = summaries_of(episodes)
    n = len(summaries)
    out: dict[str, float] = {"episodes": float(n), "episodes_per_min": n * 60.0 / seconds}
    if n == 0:
        return out
    out.update(reward_metrics(summaries, groups))
    turns = sum(s.steps for s in summaries)
    out["completions/clipped_ratio"] = sum(s.clipped_responses for s in summaries) / turns if turns else 0.0
    out["grading/tampered_rate"] = sum(1 for s in summaries if s.tampered) / n

    generated = applied = 0
    rejected: Counter[str] = Counter()
    for summary in summaries:
        g, a, r = summary.patch_counts()
        generated, applied = generated + g, applied + a
        rejected.update(r)
    if switches.log_patch_stats:
        out["patch_success_rate"] = out["reward/resolved_rate"]
        out["patch_generated"] = float(generated)
        out["patch_applied"] = float(applied)
        out["patch_rejected"] = float(sum(rejected.values()))
    if switches.log_cgm_errors:
        for reason, count in sorted(rejected.items()):
            out[f"reject/{reason}"] = float(count)
    if switches.log_planner_parse_errors:
        out["planner_parse_error_rate"] = sum(s.parse_errors for s in summaries) / turns if turns else 0.0
    out.update(localisation_metrics(s.localisation for s in summaries))
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
