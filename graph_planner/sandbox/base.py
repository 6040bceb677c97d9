"""The Sandbox protocol every backend implements (docker, local, r2egym); the env never knows which one runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


class SandboxError(RuntimeError):
    """A sandbox operation failed; the message names the backend, container/dir and command."""


class HiddenPathError(SandboxError):
    """The agent tried to read, write or run hidden tests before grading."""


class PatchRejected(SandboxError):
    """A patch was refused (paths outside the repo, binary junk, does not apply)."""


@dataclass
class ExecResult:
    rc: int
    stdout: str
    stderr: str = ""
    seconds: float = 0.0
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out

    @property
    def output(self) -> str:
        return self.stdout + (("\n" + self.stderr) if self.stderr else "")


@dataclass
class TestReport:
    """Result of one graded test run; per-test statuses are kept for reports and rewards."""

    __test__ = False  # not a pytest class

    resolved: bool
    mode: str  # "swebench" | "r2e" | "selectors"
    statuses: dict[str, str] = field(default_factory=dict)
    fail_to_pass: dict[str, list[str]] = field(default_factory=lambda: {"success": [], "failure": []})
    pass_to_pass: dict[str, list[str]] = field(default_factory=lambda: {"success": [], "failure": []})
    rc: int = 0
    seconds: float = 0.0
    timed_out: bool = False
    log_tail: str = ""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "resolved": self.resolved,
            "mode": self.mode,
            "statuses": self.statuses,
            "FAIL_TO_PASS": self.fail_to_pass,
            "PASS_TO_PASS": self.pass_to_pass,
            "rc": self.rc,
            "seconds": self.seconds,
            "timed_out": self.timed_out,
            "error": self.error,
        }


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
