"""The graded run of a ShellSandbox as one checked script: canaries appended to the graded modules, the recorder
plugin loaded from a fresh dir outside the repository, the output streamed and bounded (graph_planner.grading:
canary, recorder, graded_command, integrity, run_grade.grade_checked_run). One round trip to the sandbox; the
sandbox's tree restore removes the canaries."""

from __future__ import annotations

import posixpath
import secrets
import shlex
import time
from typing import Any

from graph_planner.episode.results import TestReport
from graph_planner.grading.canary import CanaryPlan, plan_canaries, selection_additions, usable_for
from graph_planner.grading.graded_command import build_script, parse_output
from graph_planner.grading.guard import PYTEST_ENV_VARS, is_test_module
from graph_planner.grading.integrity import single_pytest_command
from graph_planner.grading.recorder import plugin_name, plugin_source
from graph_planner.grading.run_grade import Checks, grade_checked_run
from graph_planner.sandbox.output_cap import was_cut

#: Where hidden R2E tests are installed (relative to the repo root) at grading time; R2E's run_tests.sh runs them.
R2E_TESTS_DIR = "r2e_tests"


def run_checked(sb: Any, targets: list[str], mode: str, start: float) -> TestReport:
    """The task's test command as one checked script (graded_command.py): canaries in the graded modules, the
    recorder plugin, bounded output; graded by grade_checked_run."""
    task = sb.task
    why_not = usable_for(task) if sb.grading_checks else "grading checks switched off"
    plan = CanaryPlan()
    if why_not is None:
        hidden = [f"{R2E_TESTS_DIR}/{n}" for n in sorted(task.hidden_tests) if is_test_module(n)]
        if not hidden and sb.hidden_tests_dir_in_sandbox and task.grading_mode == "r2e":
            listing = sb._exec_raw(f"ls {R2E_TESTS_DIR}", sb.settings.exec_timeout, None)
            hidden = [f"{R2E_TESTS_DIR}/{n}" for n in sorted(listing.stdout.split()) if is_test_module(n)]
        plan = plan_canaries(task, targets, hidden)
        targets = targets + selection_additions(plan, targets)
    unset = [v for v in PYTEST_ENV_VARS if v not in task.env]
    env_prefix = "export PYTHONDONTWRITEBYTECODE=1;" + (f" unset {' '.join(unset)};" if unset else "")
    command = " ".join([task.test_cmd, *(shlex.quote(t) for t in targets)])
    sb._grading_dir = posixpath.join(sb._grading_dir_parent(), secrets.token_hex(8))
    plugin = None
    if why_not is None:
        plugin = (plugin_name(), plugin_source(sb._grading_dir + "/record"))
    script = build_script(sb._grading_dir, command, env_prefix, plugin, plan.sources, plan.unittest_sources)
    timeout = sb.settings.test_timeout
    res = sb._exec_raw(script.script, timeout, None)
    reply = res.stdout
    graded = parse_output(reply, script.token)
    if graded is None and res.timed_out:
        reply = sb._exec_raw(script.collect, sb.settings.exec_timeout, None).stdout
        graded = parse_output(reply, script.token)
    seconds = time.monotonic() - start
    if was_cut(reply):  # the sandbox's own output cap took the middle of the reply: log lines or record entries
        return TestReport(resolved=False, mode=mode, rc=res.rc, seconds=seconds, timed_out=res.timed_out,
                          log_tail=reply[-4000:],
                          error=f"the graded run's reply ({len(reply)} characters kept) was cut by the sandbox's "
                                "output cap (sandbox/output_cap.py): not graded")
    if graded is None:
        return TestReport(resolved=False, mode=mode, rc=res.rc, seconds=seconds, timed_out=res.timed_out,
                          log_tail=res.output[-4000:],
                          error=(f"test command timed out after {timeout:g}s (sandbox.test_timeout)"
                                 if res.timed_out else f"the graded command failed (exit {res.rc})"))
    checks = Checks(plan=plan, recorder=plugin is not None, single_pytest=single_pytest_command(task.test_cmd))
    return grade_checked_run(task, graded, checks, mode, seconds, timeout, timed_out=res.timed_out)

