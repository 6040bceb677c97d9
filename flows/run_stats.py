"""Which steps of a flow run executed and which came from the cache (read back from the Prefect API), for the
demo's closing line and the flow-cache benchmark."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from uuid import UUID

from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from prefect.client.schemas.objects import TaskRun

from tasks import config, data, evaluation, images, learning, preflight, training

#: Task name -> task, for every task the flows use.
TASKS = {t.name: t for t in (config.resolve_config, data.download_and_normalise, data.build_manifest,
                             data.register_splits, images.select_images, images.prepull_image,
                             preflight.preflight, learning.sft_warm_start, training.run_training,
                             training.submit_ray_job, learning.learning_report,
                             evaluation.evaluate_checkpoint, evaluation.publish_report)}
#: Steps that run every time by design (side effects or cheap checks): never counted as re-run.
UNCACHED = {name for name, t in TASKS.items() if t.cache_policy is NO_CACHE}


@dataclass
class StepCounts:
    ran: list[str] = field(default_factory=list)       # cacheable steps that executed
    cached: list[str] = field(default_factory=list)    # cacheable steps served from the cache
    always: list[str] = field(default_factory=list)    # NO_CACHE steps (run every time by design)
    failed: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{len(self.ran)} step(s) ran, {len(self.cached)} cached, {len(self.always)} always-run "
                f"check(s), {len(self.failed)} failed")


def task_name(run_name: str) -> str:
    """``download-and-normalise-8ae`` -> ``download-and-normalise`` (Prefect appends a short id)."""
    return run_name.rsplit("-", 1)[0]


def step_counts(flow_run_id: UUID | str, settle_s: float = 1.5, timeout_s: float = 30.0) -> StepCounts:
    """Count the flow run's task runs by final state.

    Task-run states reach the API as events that the server records asynchronously, so a read right after the
    flow returns can miss the last steps: poll until every run is final and the set has not changed for
    ``settle_s`` (at most ``timeout_s``).
    """
    runs = settled_task_runs(UUID(str(flow_run_id)), settle_s, timeout_s)
    counts = StepCounts()
    for run in sorted(runs, key=lambda r: r.expected_start_time or r.created):
        name = task_name(run.name)
        state = run.state.name if run.state else "Unknown"
        if state == "Cached":
            counts.cached.append(name)
        elif run.state is not None and run.state.is_completed():
            (counts.always if name in UNCACHED else counts.ran).append(name)
        else:
            counts.failed.append(f"{name} ({state})")
    return counts


def settled_task_runs(flow_run_id: UUID, settle_s: float, timeout_s: float) -> list[TaskRun]:
    deadline = time.monotonic() + timeout_s
    last: tuple = ()
    stable_since = time.monotonic()
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
            snapshot = tuple(sorted((str(r.id), r.state_type.value if r.state_type else "") for r in runs))
            if snapshot != last:
                last, stable_since = snapshot, time.monotonic()
            final = all(r.state is not None and r.state.is_final() for r in runs)
            if (final and time.monotonic() - stable_since >= settle_s) or time.monotonic() > deadline:
                return runs
            time.sleep(0.25)
