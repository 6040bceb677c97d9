"""Pick the sandbox backend of a task, one precedence everywhere: CLI > task > config, i.e. an explicit
``backend`` argument or ``--sandbox`` (``backends.sandbox_override``), else ``task.backend``, else
``backends.sandbox``. A backend that is unknown or cannot start is an error; there is never a silent fallback.
Names, aliases and classes come from :mod:`graph_planner.sandbox.registry`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from graph_planner.config.sandbox_names import SandboxName, canonical_sandbox_name
from graph_planner.sandbox.base import Sandbox, SandboxError
from graph_planner.sandbox.registry import sandbox_class

if TYPE_CHECKING:
    from graph_planner.config.schema import RunConfig
    from graph_planner.data.record import TaskRecord

def backend_for(task: TaskRecord, config: RunConfig, explicit: str | None = None) -> SandboxName:
    """The backend ``task`` runs on: ``explicit`` (a caller's own --sandbox) > ``backends.sandbox_override``
    (--sandbox recorded in the run config, so worker processes see it too) > ``task.backend`` >
    ``backends.sandbox``; an alias (``repoenv``) is resolved, an unknown name is a SandboxError listing the valid
    ones."""
    name = explicit or config.backends.sandbox_override or task.backend or config.backends.sandbox
    try:
        return canonical_sandbox_name(name)
    except ValueError as exc:
        raise SandboxError(f"task {task.task_id}: {exc}") from None


def make_sandbox(task: TaskRecord, config: RunConfig, dataset_dir: str | Path | None = None,
                 run_id: str = "local", backend: str | None = None) -> Sandbox:
    """Construct (not start) the sandbox of ``task`` on :func:`backend_for`'s backend."""
    name = backend_for(task, config, backend)
    try:
        cls = sandbox_class(name)
    except SandboxError as exc:
        raise SandboxError(f"task {task.task_id}: {exc}") from exc
    return cls(task, config.sandbox, dataset_dir, run_id)
