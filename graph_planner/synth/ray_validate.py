"""``gp data synth --executor ray``: candidate bugs validated as Ray tasks, on the cluster the eval executor uses
(``resources.ray_address`` / ``RAY_ADDRESS``, else a private local one with its own token; eval/ray_executor.py).

Each Ray task takes a chunk of candidates and validates them exactly as the local path does (one sandbox of the
clean tree per task, started once; :func:`validate.validate_candidates` with one worker), so a candidate costs test
runs, not sandbox starts. The repository is read at its path on the node: a private cluster or a shared file
system. Every candidate is judged (no windows: chunks finish in any order); ``max_tasks`` still keeps the first
valid ones in candidate order, so the tasks written do not depend on which node was faster.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from graph_planner.config.schema import RunConfig, SandboxConfig
from graph_planner.data.record import TaskRecord
from graph_planner.synth.modifiers import Mutation
from graph_planner.synth.validate import Baseline, Verdict, validate_candidates


def _validate_chunk(task_json: str, settings: dict[str, Any], base: Baseline,
                    mutations: list[Mutation]) -> list[Verdict]:
    """Runs in a Ray worker: the local validation of one chunk in one sandbox."""
    task = TaskRecord.model_validate_json(task_json)
    verdicts = validate_candidates(task, SandboxConfig.model_validate(settings), base, mutations, workers=1)
    return [v for v in verdicts if v is not None]


def chunks(n: int, slots: int, per_slot: int = 2) -> list[range]:
    """Index ranges of about ``per_slot`` chunks per CPU slot: few enough that a sandbox start is amortised over
    several candidates, enough that a slow chunk does not hold the others back."""
    if n == 0:
        return []
    size = max(1, math.ceil(n / max(1, slots * per_slot)))
    return [range(lo, min(lo + size, n)) for lo in range(0, n, size)]


def validate_on_ray(task: TaskRecord, settings: SandboxConfig, base: Baseline, candidates: Sequence[Mutation],
                    config: RunConfig, on_done: Callable[[Verdict], None] | None = None) -> list[Verdict | None]:
    """Verdicts in candidate order, every candidate judged on the Ray cluster."""
    import ray

    from graph_planner.eval.ray_executor import ray_session

    verdicts: list[Verdict | None] = [None] * len(candidates)
    with ray_session(config):
        slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        remote = ray.remote(num_cpus=1, max_retries=1)(_validate_chunk)
        settings_dict = settings.model_dump(mode="json")
        task_json = task.model_dump_json()
        inflight = {remote.remote(task_json, settings_dict, base, [candidates[i] for i in part]): part
                    for part in chunks(len(candidates), slots)}
        while inflight:
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                part = inflight.pop(ref)
                for i, verdict in zip(part, ray.get(ref), strict=True):
                    verdicts[i] = verdict
                    if on_done is not None:
                        on_done(verdict)
    return verdicts
