"""Preflight: the five resource rules of seed 000 section 4, checked before any GPU work starts."""

from __future__ import annotations

from dataclasses import dataclass

from graph_planner.config.schema import RunConfig

FIXES = (
    "fix 1: lower parallel.tensor_parallel_planner / tensor_parallel_cgm or parallel.replicas",
    "fix 2: lower concurrency (parallel.parallel_agents / parallel.rollout_workers) or raise "
    "parallel.workflow_parallel",
    "fix 3: raise Ray resources (resources.ray_num_gpus / resources.ray_num_cpus) or add GPUs/nodes "
    "(resources.num_gpus / resources.num_nodes)",
)


@dataclass(frozen=True)
class PreflightReport:
    total_gpus: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def check_rules(config: RunConfig) -> PreflightReport:
    """Evaluate every rule and collect all broken ones (not just the first)."""
    p, r = config.parallel, config.resources
    total = r.num_gpus * r.num_nodes
    problems: list[str] = []
    uses_gpus = config.training.backend == "verl" or total > 0
    if uses_gpus:
        if p.tensor_parallel_planner + p.tensor_parallel_cgm > total:
            problems.append(
                f"tensor_parallel_planner ({p.tensor_parallel_planner}) + tensor_parallel_cgm "
                f"({p.tensor_parallel_cgm}) = {p.tensor_parallel_planner + p.tensor_parallel_cgm} > "
                f"num_gpus x num_nodes = {total}"
            )
        max_tp = max(p.tensor_parallel_planner, p.tensor_parallel_cgm)
        if p.replicas * max_tp > total:
            problems.append(
                f"replicas ({p.replicas}) x max(TP) ({max_tp}) = {p.replicas * max_tp} > num_gpus x num_nodes = {total}"
            )
        if r.ray_num_gpus < p.replicas:
            problems.append(f"resources.ray_num_gpus ({r.ray_num_gpus}) < parallel.replicas ({p.replicas})")
    need_slots = max(p.parallel_agents, p.rollout_workers)
    if p.workflow_parallel < need_slots:
        problems.append(
            f"workflow_parallel ({p.workflow_parallel}) < max(parallel_agents, rollout_workers) ({need_slots})"
        )
    if r.ray_num_cpus < 4 * p.rollout_workers:
        problems.append(
            f"resources.ray_num_cpus ({r.ray_num_cpus}) < 4 x rollout_workers ({4 * p.rollout_workers})"
        )
    return PreflightReport(total_gpus=total, problems=problems)


def preflight_check(config: RunConfig) -> PreflightReport:
    """Raise one ValueError naming every broken rule and the three fixes; return the report when all pass.

    GPU rules apply when the run uses GPUs (verl backend, or any GPUs configured); a CPU-only embedded run
    (toy model, local GRPO, num_gpus 0) only has to satisfy the concurrency and CPU rules.
    """
    report = check_rules(config)
    if report.problems:
        lines = ["preflight failed:"] + [f"  - {p}" for p in report.problems] + ["possible fixes:"]
        lines += [f"  - {f}" for f in FIXES]
        raise ValueError("\n".join(lines))
    return report
