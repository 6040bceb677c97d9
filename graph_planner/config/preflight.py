"""Preflight: the five resource rules of seed 000 section 4, checked before any GPU work starts.

Co-location (seed 000 section 6, "planner + CGM on one card": TP 1 + 1 on 1 GPU, ``device_map_* = [0]``): when
``backends.device_map_planner`` / ``device_map_cgm`` pin GPU lists, rule 1 (TP_planner + TP_cgm <= GPUs) becomes
"each TP fits its own list, every listed GPU exists"; lists that overlap are co-location by intent, reported in
``PreflightReport.colocated``. Without lists the seed's rule 1 holds as written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    colocated: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_rules(config: RunConfig) -> PreflightReport:
    """Evaluate every rule and collect all broken ones (not just the first)."""
    p, r = config.parallel, config.resources
    total = r.num_gpus * r.num_nodes
    problems: list[str] = []
    uses_gpus = config.training.backend == "verl" or total > 0
    colocated: list[int] = []
    if uses_gpus:
        pins = {"planner": config.backends.gpus("planner"), "cgm": config.backends.gpus("cgm")}
        if any(v is not None for v in pins.values()):
            problems += _pinned_problems(config, pins, total)
            if pins["planner"] is not None and pins["cgm"] is not None and p.tensor_parallel_cgm > 0:
                colocated = sorted(set(pins["planner"]) & set(pins["cgm"]))
        elif p.tensor_parallel_planner + p.tensor_parallel_cgm > total:
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
    return PreflightReport(total_gpus=total, problems=problems, colocated=colocated)


def _pinned_problems(config: RunConfig, pins: dict[str, list[int] | None], total: int) -> list[str]:
    """Rule 1 under GPU lists: each engine's TP fits its list, listed GPUs exist, an unpinned engine fits the rest."""
    p = config.parallel
    tps = {"planner": p.tensor_parallel_planner, "cgm": p.tensor_parallel_cgm}
    problems: list[str] = []
    for which, gpus in pins.items():
        if gpus is None:
            continue
        missing = [i for i in gpus if i >= total]
        if missing:
            problems.append(f"backends.device_map_{which} {gpus} names GPU(s) {missing} beyond num_gpus x num_nodes "
                            f"= {total} (GPU indices count from 0 across nodes)")
        if tps[which] > len(gpus):
            problems.append(f"tensor_parallel_{which} ({tps[which]}) > the {len(gpus)} GPU(s) of "
                            f"backends.device_map_{which} {gpus}")
    for which, gpus in pins.items():
        other = "cgm" if which == "planner" else "planner"
        if gpus is not None and pins[other] is None and tps[other] > total - len(gpus):
            problems.append(f"tensor_parallel_{other} ({tps[other]}) > the {total - len(gpus)} GPU(s) left after "
                            f"backends.device_map_{which} {gpus} (pin it with backends.device_map_{other})")
    return problems


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
