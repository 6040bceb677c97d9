"""What a sandbox command returns (ExecResult) and how one graded test run came out (TestReport): plain data that
the sandbox backends produce, grading fills in, and the env, eval and telemetry read. Kept below both sandbox and
grading so neither imports the other for its types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ExecResult:
    """One command run in a sandbox: exit code, output, wall time, and whether the timeout killed it."""

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
    #: What the grading guard undid before the run (test / pytest-config files the patch changed or added).
    guard: list[str] = field(default_factory=list)
    #: The run was forged from inside the test process (a canary came out wrong, the log contradicts itself or the
    #: second record): never resolved, penalised by ``env.tamper_penalty``. Evidence names canaries by role only.
    tampered: bool = False
    tamper_evidence: list[str] = field(default_factory=list)
    #: The test output was cut to the grader's cap (head and tail kept); ``output_bytes`` is what the run wrote.
    truncated: bool = False
    output_bytes: int | None = None

    @property
    def verdict(self) -> str:
        """One word for reports: tampered beats everything, then error, then resolved / unresolved."""
        if self.tampered:
            return "tampered"
        if self.error:
            return "error"
        return "resolved" if self.resolved else "unresolved"

    def mark_tampered(self, *evidence: str) -> None:
        """Record forgery evidence; a tampered run is never resolved."""
        self.tampered = True
        self.resolved = False
        self.tamper_evidence.extend(e for e in evidence if e not in self.tamper_evidence)

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
            "guard": self.guard,
            "tampered": self.tampered,
            "tamper_evidence": self.tamper_evidence,
            "truncated": self.truncated,
            "output_bytes": self.output_bytes,
            "verdict": self.verdict,
        }
