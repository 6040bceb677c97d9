"""The grading checks of issue 23 as pure functions (canary.py, integrity.py, recorder.py, graded_command.py), and
their wiring through the local sandbox: canaries in the graded modules, the recorder outside the repository,
everything gone after the run. The forgeries they catch are in tests/adversarial/test_forgery.py."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from graph_planner.data.record import TaskRecord
from graph_planner.grading.canary import check_canaries, plan_canaries, scrub, selection_additions, usable_for
from graph_planner.grading.graded_command import SCAN_BYTES, build_script, parse_output
from graph_planner.grading.integrity import check_integrity, single_pytest_command
from graph_planner.grading.parse import parse_test_log
from graph_planner.grading.recorder import RunRecord, compare_with_log, parse_record, plugin_name, plugin_source


def _task(**update: object) -> TaskRecord:
    data: dict[str, object] = {
        "task_id": "t-1", "source": "swebench", "split": "test", "repo": "a/b", "problem_statement": "p",
        "test_cmd": "python -m pytest -rA", "test_files": ["tests/test_ops.py", "tests/test_wrap.py"],
        "fail_to_pass": ["tests/test_wrap.py::test_wrap_splits_long_words"],
        "pass_to_pass": ["tests/test_ops.py::test_sub_handles_zero"]}
    data.update(update)
    return TaskRecord.model_validate(data)


def test_canaries_sit_in_the_fail_to_pass_module_first_with_fresh_names_and_valid_code():
    task = _task()
    first, second = plan_canaries(task, task.test_files), plan_canaries(task, task.test_files)
    assert [c.module for c in first.canaries][:4] == ["tests/test_wrap.py"] * 4
    assert {(c.role, c.style) for c in first.canaries if c.module == "tests/test_wrap.py"} == {
        ("must-fail", "function"), ("must-pass", "function"), ("must-fail", "unittest"), ("must-pass", "unittest")}
    assert [(c.module, c.style) for c in first.canaries][4:] == [("tests/test_ops.py", "function")] * 2
    assert first.names.isdisjoint(second.names)  # drawn fresh for every run
    for plan in (first, second):
        for source in plan.sources.values():
            ast.parse("import os\n" + source)
        assert all(c.name.startswith("test_") and len(c.name.split("_")) >= 3 for c in plan.canaries)
    # no fixed prefix past pytest's own `test_`: across 20 runs the first word varies
    firsts = {c.name.split("_")[1] for _ in range(20) for c in plan_canaries(task, task.test_files).canaries}
    assert len(firsts) > 10


def test_canaries_only_where_a_pytest_run_goes_past_failures():
    assert usable_for(_task()) is None
    assert "stops" in usable_for(_task(test_cmd="python -m pytest -rA -x"))
    assert "stops" in usable_for(_task(test_cmd="pytest -rA --maxfail=1"))
    assert "not pytest" in usable_for(_task(test_cmd="./runtests.py", log_parser="django"))


def test_selected_ids_get_the_canary_ids_added_modules_do_not():
    task = _task()
    plan = plan_canaries(task, ["tests/test_wrap.py::test_wrap_splits_long_words"])
    added = selection_additions(plan, ["tests/test_wrap.py::test_wrap_splits_long_words"])
    assert set(added) == plan.ids() and len(added) == 4  # plain canaries only: a TestCase may not be appended
    assert not plan.unittest_sources
    assert selection_additions(plan, ["tests/test_wrap.py", "tests/test_ops.py"]) == []
    assert selection_additions(plan, []) == []


def _statuses(plan, fail: str = "FAILED", extra: dict[str, str] | None = None) -> dict[str, str]:
    out = {c.test_id: (fail if c.role == "must-fail" else "PASSED") for c in plan.canaries}
    return {**out, **(extra or {})}


def test_canary_check_roles_missing_and_excuses():
    task = _task()
    plan = plan_canaries(task, task.test_files)
    record = RunRecord(exitstatus=1)
    assert check_canaries(plan, _statuses(plan), record, True, True).tampered == []
    forced = check_canaries(plan, _statuses(plan, fail="PASSED"), record, True, True).tampered
    assert len(forced) == 3 and all("must-fail" in e and "::" not in e for e in forced)
    assert len(check_canaries(plan, {}, record, True, True).tampered) == 6  # missing from a finished run
    assert check_canaries(plan, {}, record, True, False).lost  # the log was cut: not trusted, not tampered
    broken = RunRecord(exitstatus=2, collect_errors=["tests/test_wrap.py", "tests/test_ops.py"])
    assert check_canaries(plan, {}, broken, True, True).tampered == []


def test_scrub_removes_canary_lines_statuses_and_counts():
    task = _task()
    plan = plan_canaries(task, task.test_files)
    statuses = _statuses(plan, extra={"tests/test_wrap.py::test_wrap_splits_long_words": "PASSED"})
    lines = [f"{s} {t}" + (" - x" if s == "FAILED" else "") for t, s in statuses.items()]
    log = "\n".join(["collected 7 items", *lines, "========== 3 failed, 4 passed in 0.21s =========="]) + "\n"
    text, left = scrub(plan, log, statuses)
    assert left == {"tests/test_wrap.py::test_wrap_splits_long_words": "PASSED"}
    assert not any(name in text for name in plan.names)
    assert text.splitlines()[-1] == "========== 1 passed in 0.21s =========="


def test_integrity_flags_self_contradicting_logs():
    summary = "===== 1 failed, 1 passed in 0.1s =====\n"
    honest = "PASSED t.py::a\nFAILED t.py::b - boom\n" + summary
    assert check_integrity(honest, 1, RunRecord(exitstatus=1), True, {}) == []
    assert "several statuses" in check_integrity(honest + "FAILED t.py::a\n", 1, None, True, {})[0]
    assert "after pytest's final summary" in check_integrity(honest + "PASSED t.py::c\n", 1, None, True, {})[0]
    assert "exited 0" in check_integrity(honest, 0, None, True, {})[0]
    assert "exit status 1" in check_integrity(honest, 3, RunRecord(exitstatus=1), True, {})[0]
    teardown = "PASSED t.py::a\nERROR t.py::a - teardown\n" + summary
    assert check_integrity(teardown, 1, RunRecord(reports={"t.py::a": {"teardown": "failed"}}, exitstatus=1),
                           True, {}) == []
    assert check_integrity(teardown, 1, RunRecord(exitstatus=1), True, {})
    # parametrised ids with spaces are different tests, not one test reported twice
    params = "PASSED t.py::a[x y]\nFAILED t.py::a[x z] - boom\n" + summary
    assert check_integrity(params, 1, RunRecord(exitstatus=1), True, {}) == []
    assert check_integrity(honest, 0, None, False, {}) == []  # `pytest ... || true` exits 0 on its own


def test_single_pytest_command():
    assert single_pytest_command("python -m pytest -rA")
    assert single_pytest_command("pytest -rA tests")
    assert not single_pytest_command("python -m pytest -rA; echo done")
    assert not single_pytest_command("./run_tests.sh")


def test_the_record_witnesses_passes():
    record = parse_record('{"reports": {"t.py::a[x - y]": {"setup": "passed", "call": "passed"}, '
                          '"t.py::b": {"setup": "passed", "call": "failed"}}, "exitstatus": 1}')
    assert record is not None and record.finished
    assert compare_with_log({"t.py::a[x": "PASSED"}, record, {}) == []  # a parser that cut the id short
    assert compare_with_log({"t.py::b": "PASSED", "t.py::c": "PASSED"}, record, {}) and \
        len(compare_with_log({"t.py::b": "PASSED", "t.py::c": "PASSED"}, record, {})) == 2
    assert parse_record("") is None and parse_record("not json") is None
    two = parse_record('{"reports": {"a.py::x": {"call": "passed"}}, "exitstatus": 0}\n'
                       '{"reports": {"b.py::y": {"call": "failed"}}, "exitstatus": 1}\n')
    assert two is not None and set(two.reports) == {"a.py::x", "b.py::y"} and two.exitstatus == 1
    assert plugin_name() != plugin_name() and plugin_name().isalpha()


def _run_script(tmp_path, first: str):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_x.py").write_text("def test_real():\n    pass")  # no trailing newline
    (repo / "tests" / "test_u.py").write_text("import unittest\n\n\nclass TestU(unittest.TestCase):\n"
                                              "    def test_u(self):\n        pass\n")
    ids = {"tests/test_x.py": "tests/test_x.py::test_real", "tests/test_u.py": "tests/test_u.py::TestU::test_u"}
    second = next(m for m in ids if m != first)
    task = _task(test_files=[first, second], fail_to_pass=[ids[first]], pass_to_pass=[ids[second]])
    plan = plan_canaries(task, task.test_files)
    workdir = str(tmp_path / f"g{uuid.uuid4().hex[:6]}")
    name = plugin_name()
    script = build_script(workdir, f"python -m pytest -rA -p no:cacheprovider {first} {second} ; printf 'tail-end'",
                          "unset PYTEST_ADDOPTS;", (name, plugin_source(workdir + "/record")),
                          {**plan.sources, "tests/missing.py": "x"}, plan.unittest_sources)
    run = subprocess.run(["bash", "-c", script.script], cwd=repo, capture_output=True, text=True, timeout=120,
                         env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
                              "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    out = parse_output(run.stdout, script.token)
    assert out is not None, run.stdout[-2000:] + run.stderr[-2000:]
    assert not Path(workdir).exists()  # the script removes its dir
    assert name not in (repo / first).read_text()
    return plan, out


def test_the_graded_script_streams_the_output_and_loads_the_recorder_from_its_own_dir(tmp_path):
    plan, out = _run_script(tmp_path, "tests/test_u.py")
    assert out.skipped_modules == {"tests/missing.py"} and not out.truncated
    assert out.output_bytes == len(out.log.encode()) and out.log.endswith("tail-end")
    record = parse_record(out.record_text)
    assert record is not None and record.exitstatus == 1  # the must-fail canaries failed, seen by the recorder
    plan.drop_modules(out.skipped_modules)
    statuses = parse_test_log(out.log)
    assert check_canaries(plan, statuses, record, True, True).tampered == []
    assert len(statuses) == 8 and {s for t, s in statuses.items() if t not in plan.ids()} == {"PASSED"}


def test_unittest_canaries_only_in_a_module_that_uses_unittest(tmp_path):
    plan, out = _run_script(tmp_path, "tests/test_x.py")
    assert out.skipped_modules == {"tests/missing.py", "tests/test_x.py::unittest"}
    plan.drop_modules(out.skipped_modules)
    assert {c.style for c in plan.canaries} == {"function"} and len(plan.canaries) == 4
    statuses = parse_test_log(out.log)
    assert set(statuses) == plan.ids() | {"tests/test_x.py::test_real", "tests/test_u.py::TestU::test_u"}


def test_a_testcase_past_the_shell_scanned_head_of_a_long_module_still_gets_its_unittest_canaries(tmp_path):
    """bash's builtin read scans the first SCAN_BYTES; grep looks at the rest of a longer module."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    padding = "# " + "x" * 78 + "\n"
    late = padding * (SCAN_BYTES // len(padding) + 10) + "import unittest\n\n\nclass TestU(unittest.TestCase):\n" \
        "    def test_u(self):\n        pass\n"
    (repo / "tests" / "test_late.py").write_text(late)
    (repo / "tests" / "test_plain.py").write_text(padding * (SCAN_BYTES // len(padding) + 10) + "def test_p():\n"
                                                  "    pass\n")
    workdir = str(tmp_path / "g")
    script = build_script(workdir, "true", "", None, {"tests/test_late.py": "\n", "tests/test_plain.py": "\n"},
                          {"tests/test_late.py": "\n# unittest canary\n", "tests/test_plain.py": "\n# unittest canary\n"})
    run = subprocess.run(["bash", "-c", script.script], cwd=repo, capture_output=True, text=True, timeout=60)
    out = parse_output(run.stdout, script.token)
    assert out is not None, run.stderr
    assert out.skipped_modules == {"tests/test_plain.py::unittest"}
    assert (repo / "tests" / "test_late.py").read_text().endswith("# unittest canary\n")
    assert "# unittest canary" not in (repo / "tests" / "test_plain.py").read_text()


@pytest.mark.skipif(shutil.which("strace") is None, reason="counts the programs a script starts with strace")
def test_the_checks_start_no_program_of_their_own(tmp_path):
    """Issue 23's cost goal (<= 1 extra process start per graded run): the graded script with the recorder and
    canaries starts exactly the programs the bare one starts (plugin, canaries and TestCase look-up are shell
    builtins; the sections come back through one cat either way)."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_u.py").write_text("import unittest\n\n\nclass TestU(unittest.TestCase):\n"
                                              "    def test_u(self):\n        pass\n")
    task = _task(test_files=["tests/test_u.py"], fail_to_pass=["tests/test_u.py::TestU::test_u"], pass_to_pass=[])
    plan = plan_canaries(task, task.test_files)
    started = {}
    for checks in (True, False):
        workdir = str(tmp_path / f"g{int(checks)}")
        plugin = (plugin_name(), plugin_source(workdir + "/record")) if checks else None
        script = build_script(workdir, "true", "", plugin, plan.sources if checks else {},
                              plan.unittest_sources if checks else None)
        traces = tmp_path / f"trace{int(checks)}"
        traces.mkdir()
        # -ff: one file per process, so no execve is split into "unfinished" / "resumed" lines
        subprocess.run(["strace", "-ff", "-qq", "-e", "trace=execve", "-o", str(traces / "t"), "bash", "-c",
                        script.script], cwd=repo, capture_output=True, text=True, timeout=60, check=True)
        started[checks] = sorted(path for trace in traces.iterdir()
                                 for path in re.findall(r'execve\("([^"]+)".*\) = 0$', trace.read_text(), re.M))
    assert started[True] == started[False]
    assert "/usr/bin/grep" not in started[True] and len([p for p in started[True] if p.endswith("/cat")]) == 1
