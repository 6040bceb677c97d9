"""Pick the sandbox backend of a task: task.backend, else config.backends.sandbox. A backend that is unknown or
cannot start is an error; there is never a silent fallback to another backend."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from graph_planner.sandbox.base import Sandbox, SandboxError

if TYPE_CHECKING:
    from graph_planner.config.schema import RunConfig
    from graph_planner.data.record import TaskRecord

BACKENDS = ("local", "docker", "r2egym")


def backend_for(task: TaskRecord, config: RunConfig) -> str:
    return task.backend or config.backends.sandbox


def make_sandbox(task: TaskRecord, config: RunConfig, dataset_dir: str | Path | None = None,
                 run_id: str = "local", backend: str | None = None) -> Sandbox:
    """Construct (not start) the sandbox of ``task``; ``backend`` overrides task and config when given."""
    name = backend or backend_for(task, config)
    if name == "local":
        from graph_planner.sandbox.local import LocalSandbox

        return LocalSandbox(task, config, dataset_dir, run_id)
    if name == "docker":
        try:
            from graph_planner.sandbox.docker import DockerSandbox
        except ImportError as exc:
            raise SandboxError(f"task {task.task_id}: docker backend unavailable: {exc}") from exc
        return DockerSandbox(task, config, dataset_dir, run_id)
    if name == "r2egym":
        from graph_planner.sandbox.r2egym import R2EGymSandbox

        return R2EGymSandbox(task, config, dataset_dir, run_id)
    raise SandboxError(f"task {task.task_id}: unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)}")
