"""The Sandbox protocol every backend implements (docker, local, r2egym); the env never knows which one runs."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from graph_planner.episode.results import ExecResult, TestReport


class SandboxError(RuntimeError):
    """A sandbox operation failed; the message names the backend, container/dir and command."""


class HiddenPathError(SandboxError):
    """The agent tried to read, write or run hidden tests before grading."""


class PatchRejected(SandboxError):
    """A patch was refused (paths outside the repo, binary junk, does not apply)."""


__all__ = ["ExecResult", "HiddenPathError", "PatchRejected", "Sandbox", "SandboxError", "TestReport"]


@runtime_checkable
class Sandbox(Protocol):
    """A task's repository in an isolated place; paths are relative to the repo root (the task workdir)."""

    def start(self) -> None: ...

    def exec(self, cmd: str, timeout: float | None = None) -> ExecResult: ...

    def read_file(self, path: str) -> str: ...

    def write_file(self, path: str, content: str) -> None: ...

    def list_files(self, pattern: str = "**/*.py") -> list[str]: ...

    def apply_patch(self, unified_diff: str) -> None: ...

    def diff(self) -> str: ...

    def snapshot(self) -> str: ...

    def restore(self, snapshot_id: str) -> None: ...

    def run_tests(self, selectors: list[str] | None = None) -> TestReport: ...

    def close(self) -> None: ...

    def __enter__(self) -> "Sandbox": ...

    def __exit__(self, *exc: object) -> None: ...
