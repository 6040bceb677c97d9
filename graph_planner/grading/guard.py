"""Grading guard: what a patch may NOT change about how it is graded.

The patch author is untrusted (RL optimises whatever the grader lets through). Before the graded test command
runs, the sandbox puts back the task's own version of

- every file that holds a graded test (the files of FAIL_TO_PASS / PASS_TO_PASS ids, ``test_files`` and the
  files the test_patch touches: the SWE-bench harness resets the latter; this guard also covers the rest, so a
  PASS_TO_PASS test cannot be "kept passing" by rewriting it);
- every file pytest (or the interpreter) reads for configuration: any ``conftest.py``, ``pytest.ini``,
  ``sitecustomize.py`` / ``usercustomize.py`` at any depth, and ``pyproject.toml`` / ``setup.cfg`` /
  ``tox.ini`` whose pytest section the patch changed or added (their other sections stay as patched);
- every test module (``test_*.py`` / ``*_test.py``) the patch added or changed: when a whole suite runs, such a
  module is collected and could patch the package at import time; it never counts for grading anyway.

Policy (chosen over rejecting such patches): **restore, and say so**. A changed file is reset to its base
version, a new one is removed, and each action is listed in ``TestReport.guard`` (and in `gp grade`'s report),
so an honest patch that also touched, say, `setup.cfg`'s flake8 section is graded normally, while a patch whose
"fix" is a conftest that turns failures into passes is graded on the task's own configuration.

The functions here are pure (bytes in, a plan out); the sandbox gathers the files and carries the plan out.
"""

from __future__ import annotations

import configparser
import fnmatch
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field

import tomllib

#: Files read for configuration as a whole: any change or new copy is undone.
WHOLE_FILE_CONFIG = ("conftest.py", "pytest.ini", "sitecustomize.py", "usercustomize.py")
#: Files where only a pytest section matters: the file is reset only when that section changed.
SECTION_CONFIG = ("pyproject.toml", "setup.cfg", "tox.ini")
CONFIG_BASENAMES = WHOLE_FILE_CONFIG + SECTION_CONFIG
#: Environment variables that inject pytest options or plugins; unset for the graded run unless the task sets them.
PYTEST_ENV_VARS = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")


#: pytest's default test-module names. A patch's new or changed test module is not graded: it could patch the
#: package at import (collection) time, and it never counts for FAIL_TO_PASS / PASS_TO_PASS anyway.
TEST_MODULE_GLOBS = ("test_*.py", "*_test.py")


def is_config_file(path: str) -> bool:
    return posixpath.basename(path) in CONFIG_BASENAMES


def is_test_module(path: str) -> bool:
    return any(fnmatch.fnmatchcase(posixpath.basename(path), glob) for glob in TEST_MODULE_GLOBS)


def is_guarded(path: str) -> bool:
    """Files the guard compares with the base commit (besides the task's own test files)."""
    return is_config_file(path) or is_test_module(path)


def pytest_section(path: str, data: bytes | None) -> str | None:
    """The pytest part of a config file as a canonical string (None when the file has none).

    pyproject.toml: ``[tool.pytest.ini_options]`` (and ``[tool.pytest]``); setup.cfg: ``[tool:pytest]``;
    tox.ini / pytest.ini: ``[pytest]``. A file that does not parse is returned whole: pytest may still read it,
    and "cannot tell" must count as changed.
    """
    if data is None:
        return None
    name = posixpath.basename(path)
    text = data.decode("utf-8", errors="replace")
    if name == "pyproject.toml":
        try:
            tool = tomllib.loads(text).get("tool", {})
        except tomllib.TOMLDecodeError:
            return "unparsable:" + text
        pytest = tool.get("pytest") if isinstance(tool, dict) else None
        return None if pytest is None else repr(pytest)
    sections = ("tool:pytest",) if name == "setup.cfg" else ("pytest",)
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return "unparsable:" + text
    found = [f"[{s}]" + repr(sorted(parser.items(s))) for s in sections if parser.has_section(s)]
    return "".join(found) or None


@dataclass
class GuardPlan:
    """What the sandbox must do before the graded run: reset files to base, remove new ones; and why."""

    restore: list[str] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.restore or self.remove)


def plan_guard(base: dict[str, str], current: dict[str, str], test_files: set[str],
               read_pair: Callable[[str], tuple[bytes | None, bytes | None]]) -> GuardPlan:
    """Compare the base version of every guarded file with the tree to grade.

    ``base`` / ``current``: path -> content id (git blob id, or any string that differs when the bytes differ;
    a symlink or directory in place of a file gets an id of its own) at the task's base commit and in the tree
    now; ``test_files``: the task's graded test files (reset whenever they differ); ``read_pair(path)``: the
    (base, current) bytes of a section-config file whose ids differ, to see whether its pytest part changed.
    """
    plan = GuardPlan()
    for path in sorted(set(base) | set(current)):
        old, new = base.get(path), current.get(path)
        if old == new:
            continue
        name = posixpath.basename(path)
        is_test = path in test_files
        if not is_test and name in SECTION_CONFIG:
            old_bytes, new_bytes = read_pair(path)
            if old is not None and new is not None and \
                    pytest_section(path, old_bytes) == pytest_section(path, new_bytes):
                continue  # the patch changed other sections (dependencies, flake8, ...): not a grading matter
            if old is None and pytest_section(path, new_bytes) is None:
                continue  # a new file without a pytest section configures nothing
        what = ("test file" if is_test else "pytest section of " + name if name in SECTION_CONFIG
                else "test module" if is_test_module(path) else name)
        if old is None:
            plan.remove.append(path)
            plan.notes.append(f"removed {path}: a new {what} added by the patch is not used for grading")
        else:
            plan.restore.append(path)
            verb = "deleted" if new is None else "changed"
            plan.notes.append(f"restored {path}: the patch {verb} this {what}; grading uses the task's version")
    return plan


def test_file_paths(fail_to_pass: list[str], pass_to_pass: list[str], test_files: list[str],
                    test_patch_files: list[str]) -> set[str]:
    """Repository files that hold graded tests (pytest ids `path::name`, plus the task's listed test files)."""
    paths = {t.split("::", 1)[0] for t in [*fail_to_pass, *pass_to_pass] if "::" in t}
    paths |= {p.rstrip("/") for p in test_files if p.endswith(".py")}
    paths |= set(test_patch_files)
    return {p for p in paths if p and not p.startswith("/") and ".." not in p.split("/")}
