"""Which lines of the repository the clean test suite executes, measured once per repository in its sandbox.

A bug on a line no test runs can fail no test: such candidates are dropped before validation (each would cost a
full test run to learn nothing). The tracer is a few lines of ``sys.settrace`` in a fork of the pytest fork server
(runner.py) that only records frames of files under the repository (``coverage`` is not a dependency). When the
traced run fails for any reason the filter is simply off.
"""

from __future__ import annotations

from graph_planner.sandbox.local import LocalSandbox
from graph_planner.synth.runner import ForkRunner


def executed_lines(where: LocalSandbox | ForkRunner, timeout: float) -> dict[str, set[int]] | None:
    """repo-relative path -> executed line numbers, or None when the traced run gave no result. ``where``: a
    started sandbox (a fork server is started for the one run) or the fork server of one."""
    if isinstance(where, ForkRunner):
        return where.executed_lines(timeout)
    with ForkRunner(where) as runner:
        return runner.executed_lines(timeout)
