"""The one place an episode is put together: synthesiser + sandbox + code-graph cache -> PlannerEnv.

Training rollouts, `gp eval`, `gp smoke`, the verl agent loop and the rLLM adapters all build their env here, so a
new part of an episode (a synthesiser option, a sandbox setting, a cache) is wired once. Precedence, applied here
and nowhere else:

- sandbox backend: the CLI's ``--sandbox`` (``backends.sandbox_override``) > the task's ``backend`` >
  ``backends.sandbox`` (:func:`graph_planner.sandbox.factory.backend_for`);
- step budget: an explicit ``max_steps`` (the CLI's ``--max-steps``) > the task's cap (``TaskRecord.max_steps``)
  over the run's ``env.max_steps`` (the smaller of the two) (:func:`graph_planner.env.planner_env.step_budget`).

Sandboxes open at once are capped here too, for every runner: each sandbox built here holds one of the run's
``parallel.workflow_parallel`` slots per node (:mod:`graph_planner.sandbox.slots`) from its start to its close,
whatever process or thread opened it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from graph_planner.codegraph import GraphCache
from graph_planner.config.paths import run_paths
from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.models.synthesizers import PatchSynthesizer, make_synthesizer
from graph_planner.sandbox.base import Sandbox
from graph_planner.sandbox.factory import make_sandbox
from graph_planner.sandbox.shell import ShellSandbox
from graph_planner.sandbox.slots import SandboxSlot, SandboxSlots


def graph_cache(config: RunConfig) -> GraphCache:
    """The run's code-graph cache (``<paths.cache_dir>/graphs``), shared by every episode of a process."""
    return GraphCache(run_paths(config).graphs)


def sandbox_slots(config: RunConfig) -> SandboxSlots:
    """The run's sandbox cap on this node: ``parallel.workflow_parallel`` slots, shared by the run's processes."""
    return SandboxSlots.for_run(run_paths(config).run_dir, config.parallel.workflow_parallel)


def build_env(task: TaskRecord, config: RunConfig, dataset_dir: str | Path | None, run_id: str, *,
              cache: GraphCache | None = None, max_steps: int | None = None,
              synthesizer: PatchSynthesizer | None = None, sandbox: Sandbox | None = None,
              slot: SandboxSlot | None = None) -> PlannerEnv:
    """The env of one episode; its sandbox is constructed, not started (``PlannerEnv.reset`` starts it, the caller
    closes it). Starting it waits for one of the run's sandbox slots, closing it frees the slot; ``slot`` is one
    the caller already holds (the verl agent loop waits for it without blocking a thread) and the sandbox takes
    it over. ``synthesizer`` / ``sandbox`` replace the configured ones (benchmarks, diagnostics)."""
    if sandbox is None:
        sandbox = make_sandbox(task, config, dataset_dir, run_id)
    if isinstance(sandbox, ShellSandbox):  # every backend; a caller's own test double is not capped
        sandbox.slots, sandbox.slot = sandbox_slots(config), slot
    return PlannerEnv(
        task,
        sandbox,
        config.env,
        synthesizer if synthesizer is not None else make_synthesizer(config, task),
        graph_cache=cache if cache is not None else graph_cache(config),
        max_steps=max_steps,
        grade_in_fresh_sandbox=config.sandbox.grade_in_fresh_sandbox,
    )


@contextmanager
def open_env(task: TaskRecord, config: RunConfig, dataset_dir: str | Path | None, run_id: str, *,
             cache: GraphCache | None = None, max_steps: int | None = None,
             synthesizer: PatchSynthesizer | None = None) -> Iterator[PlannerEnv]:
    """:func:`build_env` with its sandbox started, closed again on every path out of the ``with`` block."""
    env = build_env(task, config, dataset_dir, run_id, cache=cache, max_steps=max_steps, synthesizer=synthesizer)
    with env.sandbox:
        yield env
