"""Sandboxes: one protocol (base.Sandbox), backends local / docker / r2egym built on ShellSandbox, and
make_sandbox to pick one (never falling back to another)."""

from graph_planner.sandbox.base import (
    ExecResult,
    HiddenPathError,
    PatchRejected,
    Sandbox,
    SandboxError,
    TestReport,
)
from graph_planner.sandbox.factory import make_sandbox

__all__ = ["ExecResult", "HiddenPathError", "PatchRejected", "Sandbox", "SandboxError", "TestReport",
           "make_sandbox"]
