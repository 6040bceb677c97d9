"""R2E-Gym backend: the task runs in R2E-Gym's own RepoEnv / DockerRuntime when the user installed `r2egym`
(not on PyPI: `pip install -e` from its git checkout). Absent → a clear error, never another backend."""

from __future__ import annotations

import base64
import importlib
import re
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph_planner.episode.results import ExecResult
from graph_planner.sandbox.base import SandboxError
from graph_planner.sandbox.shell import ShellSandbox

if TYPE_CHECKING:
    from graph_planner.config.schema import SandboxConfig
    from graph_planner.data.record import TaskRecord

INSTALL_HINT = ("backend r2egym needs R2E-Gym, which is not on PyPI: git clone https://github.com/R2E-Gym/R2E-Gym "
                "&& pip install -e R2E-Gym (it pins swebench==3.0.2); or choose --sandbox docker / local")


def import_r2egym_env() -> tuple[Any, Any]:
    """(EnvArgs, RepoEnv) from r2egym.agenthub.environment.env, or SandboxError with the install hint."""
    try:
        module = importlib.import_module("r2egym.agenthub.environment.env")
    except ImportError as exc:
        raise SandboxError(f"{INSTALL_HINT} (import failed: {exc})") from None
    return module.EnvArgs, module.RepoEnv


class R2EGymSandbox(ShellSandbox):
    """Runs commands through R2E-Gym's DockerRuntime; grading, guards and snapshots come from ShellSandbox."""

    backend = "r2egym"
    hidden_tests_dir_in_sandbox = True

    def __init__(self, task: TaskRecord, settings: SandboxConfig, dataset_dir: str | Path | None = None,
                 run_id: str = "local") -> None:
        super().__init__(task, settings, dataset_dir, run_id)
        self._env_args, self._repo_env_cls = import_r2egym_env()  # fail at construction: no silent fallback
        self._env: Any = None

    @property
    def where(self) -> str:
        return f"R2E-Gym RepoEnv (image {self.task.image})"

    def _start_backend(self) -> None:
        row = self.task.metadata.get("r2e_row")
        if not isinstance(row, dict):
            raise SandboxError(f"task {self.task.task_id}: the r2egym backend needs the original R2E-Gym row in "
                               "metadata['r2e_row'] (written by `gp data prepare` for R2E sources)")
        try:
            self._env = self._repo_env_cls(self._env_args(ds=row))
        except Exception as exc:  # R2E-Gym raises bare KeyErrors for malformed rows
            raise SandboxError(f"R2E-Gym RepoEnv failed for task {self.task.task_id}: {exc!r}") from exc

    def _close_backend(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    def _runtime(self) -> Any:
        if self._env is None:
            raise SandboxError(f"r2egym sandbox for task {self.task.task_id}: not started")
        return self._env.runtime

    def _exec_raw(self, cmd: str, timeout: float, cwd: str | None = None) -> ExecResult:
        """DockerRuntime.run returns (output, "0" | "-1" (timed out) | "Error: Exit code N"), stdout+stderr merged."""
        workdir = cwd or self.task.workdir
        script = f"cd {shlex.quote(workdir)} && {cmd}"
        start = time.monotonic()
        output, code = self._runtime().run(f"bash -c {shlex.quote(script)}", timeout=max(1, int(timeout)))
        code = str(code).strip()
        seconds = time.monotonic() - start
        if code == "0":
            return ExecResult(rc=0, stdout=str(output), seconds=seconds)
        if code == "-1":
            return ExecResult(rc=124, stdout=str(output), seconds=seconds, timed_out=True)
        found = re.search(r"-?\d+", code)
        return ExecResult(rc=int(found.group(0)) if found else 1, stdout=str(output), seconds=seconds)

    def _put_bytes(self, path: str, data: bytes) -> None:
        target = path if path.startswith("/") else f"{self.task.workdir.rstrip('/')}/{path}"
        payload = base64.b64encode(data).decode("ascii")
        res = self._exec_raw(f"mkdir -p $(dirname {shlex.quote(target)}) && echo {payload} | base64 -d > "
                             f"{shlex.quote(target)}", self.settings.exec_timeout)
        if not res.ok:
            raise SandboxError(f"{self.where}: could not write {target}: {res.output}")

    def _get_bytes(self, path: str) -> bytes:
        target = path if path.startswith("/") else f"{self.task.workdir.rstrip('/')}/{path}"
        res = self._exec_raw(f"test -f {shlex.quote(target)} && base64 {shlex.quote(target)}",
                             self.settings.exec_timeout)
        if not res.ok:
            raise FileNotFoundError(target)
        return base64.b64decode(res.stdout)
