"""Pick the sandbox backend of a task, one precedence everywhere: CLI > task > config, i.e. an explicit
``backend`` argument or ``--sandbox`` (``backends.sandbox_override``), else ``task.backend``, else
``backends.sandbox``. A backend that is unknown or cannot start is an error; there is never a silent fallback."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from graph_planner.sandbox.base import Sandbox, SandboxError

if TYPE_CHECKING:
    from graph_planner.config.schema import RunConfig
    from graph_planner.data.record import TaskRecord

BACKENDS = ("local", "docker", "r2egym")


def backend_for(task: TaskRecord, config: RunConfig, explicit: str | None = None) -> str:
    """The backend ``task`` runs on: ``explicit`` (a caller's own --sandbox) > ``backends.sandbox_override``
    (--sandbox recorded in the run config, so worker processes see it too) > ``task.backend`` >
    ``backends.sandbox``."""
    name = explicit or config.backends.sandbox_override or task.backend or config.backends.sandbox
    return "r2egym" if name == "repoenv" else name  # seeds 001/002's name of the R2E-Gym backend


def make_sandbox(task: TaskRecord, config: RunConfig, dataset_dir: str | Path | None = None,
                 run_id: str = "local", backend: str | None = None) -> Sandbox:
    """Construct (not start) the sandbox of ``task`` on :func:`backend_for`'s backend."""
    name = backend_for(task, config, backend)
    if name == "local":
        from graph_planner.sandbox.local import LocalSandbox

        return LocalSandbox(task, config.sandbox, dataset_dir, run_id)
    if name == "docker":
        try:
            from graph_planner.sandbox.docker import DockerSandbox
        except ImportError as exc:
            raise SandboxError(f"task {task.task_id}: docker backend unavailable: {exc}") from exc
        return DockerSandbox(task, config.sandbox, dataset_dir, run_id)
    if name == "r2egym":
        from graph_planner.sandbox.r2egym import R2EGymSandbox

        return R2EGymSandbox(task, config.sandbox, dataset_dir, run_id)
    raise SandboxError(f"task {task.task_id}: unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)}")
