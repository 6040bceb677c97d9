"""ShellSandbox: the whole Sandbox protocol (guarded file ops, git patches, snapshots, graded test runs) built on
a handful of shell primitives, so the docker and local backends differ only in where a command runs.

A backend subclasses it and provides:
    _start_backend()   create the working place (temp copy, container) holding a git repo at the task base
    _close_backend()   remove it (idempotent)
    _exec_raw(cmd, timeout, cwd)  run a bash command (cwd None = repo root); kill + ExecResult(rc=124,
                       timed_out=True) when it runs past ``timeout``
    _put_bytes(path, data) / _get_bytes(path)  write / read a file; ``path`` is relative to the repo root, or
                       absolute inside the sandbox; _get_bytes raises FileNotFoundError for a missing file
    where              a property naming the place for error messages ("container abc", "dir /tmp/x")
"""

from __future__ import annotations

import logging
import posixpath
import re
import shlex
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from typing_extensions import Self

from graph_planner.episode.results import ExecResult, TestReport
from graph_planner.grading.targets import grading_targets
from graph_planner.sandbox.base import HiddenPathError, PatchRejected, SandboxError
from graph_planner.sandbox.checked_run import R2E_TESTS_DIR, run_checked
from graph_planner.sandbox.grading_guard import GuardRunner
from graph_planner.sandbox.history import trim_history_script
from graph_planner.sandbox.patching import check_patch, created_files, touched_files, unsafe_path_reason

if TYPE_CHECKING:
    from graph_planner.config.schema import SandboxConfig
    from graph_planner.data.record import TaskRecord
    from graph_planner.sandbox.slots import SandboxSlot, SandboxSlots

log = logging.getLogger(__name__)

_TREE_ID = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_PATCH_FILE = ".git/gp_apply.patch"
_TEST_PATCH_FILE = ".git/gp_test.patch"
_CLEAN_LIST_FILE = ".git/gp_clean.list"
_GENERIC_BASENAMES = {"__init__.py", "conftest.py", "setup.py", "setup.cfg", "pytest.ini", "tox.ini"}


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Path glob with `**` (any depth, including none), `*` and `?` (never crossing '/')."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


class ShellSandbox(ABC):
    """Implements every Sandbox operation in terms of the backend primitives listed in the module docstring."""

    backend: ClassVar[str] = "shell"
    #: True when the image itself holds ``task.hidden_tests_dir`` (R2E images keep tests at /r2e_tests).
    hidden_tests_dir_in_sandbox: ClassVar[bool] = False

    def __init__(self, task: TaskRecord, settings: SandboxConfig, dataset_dir: str | Path | None = None,
                 run_id: str = "local") -> None:
        self.task = task
        self.settings = settings  # the sandbox reads its own config section, nothing else of the run config
        self.dataset_dir = Path(dataset_dir) if dataset_dir is not None else None
        self.run_id = run_id
        self.op_count = 0
        self.base_commit: str | None = None
        self._started = False
        self._grading = False
        self._hidden_files: set[str] = set()
        self._baseline_ignored: set[str] = set()
        self._guard_runner: GuardRunner | None = None
        self._grading_dir = ""
        #: canaries, log integrity and the recorder on every graded run (switched off only by the benchmark that
        #: measures their cost)
        self.grading_checks = True
        #: the run's cap on open sandboxes (sandbox/slots.py), given by env/assembly.py: start() waits for a slot
        #: (or keeps ``slot``, one its caller already took), close() frees it
        self.slots: SandboxSlots | None = None
        self.slot: SandboxSlot | None = None
        hidden_dir_name = posixpath.basename(task.hidden_tests_dir.rstrip("/")) or R2E_TESTS_DIR
        self._hidden_dir_names = {R2E_TESTS_DIR, hidden_dir_name}

    # ------------------------------------------------------------------ primitives (backends provide)
    @abstractmethod
    def _start_backend(self) -> None: ...

    @abstractmethod
    def _close_backend(self) -> None: ...

    @abstractmethod
    def _exec_raw(self, cmd: str, timeout: float, cwd: str | None = None) -> ExecResult: ...

    @abstractmethod
    def _put_bytes(self, path: str, data: bytes) -> None: ...

    @abstractmethod
    def _get_bytes(self, path: str) -> bytes: ...

    @property
    @abstractmethod
    def where(self) -> str: ...

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Bring the backend up and record the base commit + hidden test locations; idempotent."""
        if self._started:
            return
        if self.slot is None and self.slots is not None:
            self.slot = self.slots.acquire_blocking()
        try:
            self._start_backend()
            try:
                self._init_repo_state()
            except BaseException:
                self._close_backend()
                raise
        except BaseException:
            self._release_slot()
            raise
        self._started = True

    def close(self) -> None:
        self._started = False
        try:
            self._close_backend()
        finally:
            self._release_slot()

    def _release_slot(self) -> None:
        slot, self.slot = self.slot, None
        if slot is not None:
            slot.release()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _init_repo_state(self) -> None:
        head = self._git("rev-parse HEAD", what="read the base commit")
        self.base_commit = head.stdout.strip()
        self._git_script(trim_history_script(self.base_commit),
                         what=f"remove history past base commit {self.base_commit}")
        ignored = self._git("ls-files -z --others --ignored --exclude-standard", what="list ignored files")
        self._baseline_ignored = {p for p in ignored.stdout.split("\x00") if p}
        if self.task.test_patch:
            new = created_files(self.task.test_patch)
            if new:
                listed = self._git("ls-tree -r --name-only HEAD -- " + " ".join(shlex.quote(p) for p in new),
                                   what="list test_patch files in the base tree")
                existing = set(listed.stdout.split("\n"))
                self._hidden_files = {p for p in new if p not in existing}

    def _require_started(self) -> None:
        if not self._started:
            raise SandboxError(f"{self.backend} sandbox for task {self.task.task_id}: call start() first")

    def _git_script(self, script: str, what: str) -> ExecResult:
        res = self._exec_raw(script, self.settings.exec_timeout, None)
        if not res.ok:
            raise SandboxError(f"{self.backend} sandbox {self.where}: could not {what}: exited {res.rc}"
                               f"{' (timed out)' if res.timed_out else ''}: {res.output.strip()[-800:]}")
        return res

    def _git(self, args: str, what: str, timeout: float | None = None) -> ExecResult:
        """Run a git command in the repo; failure raises SandboxError naming the command and the place."""
        cmd = f"git -c core.quotepath=off {args}"
        res = self._exec_raw(cmd, timeout or self.settings.exec_timeout, None)
        if not res.ok:
            raise SandboxError(f"{self.backend} sandbox {self.where}: could not {what}: `{cmd}` exited "
                               f"{res.rc}{' (timed out)' if res.timed_out else ''}: {res.output.strip()[-800:]}")
        return res

    # ------------------------------------------------------------------ hidden-test guard
    def _rel(self, path: str) -> str:
        """Normalise a user path: repo-relative (workdir prefix dropped) or absolute; '..' escapes refused."""
        workdir = self.task.workdir.rstrip("/")
        if path.startswith("/"):
            norm = posixpath.normpath(path)
            if workdir and (norm == workdir or norm.startswith(workdir + "/")):
                return posixpath.relpath(norm, workdir)
            return norm
        norm = posixpath.normpath(path)
        if norm == ".." or norm.startswith("../"):
            raise SandboxError(f"{self.backend} sandbox: path {path!r} escapes the repository")
        return norm

    def is_hidden_path(self, path: str) -> bool:
        """True when ``path`` lies in a hidden test location (R2E tests dir, new files of the test_patch)."""
        norm = self._rel(path)
        if norm.startswith("/") and norm.startswith(self.task.hidden_tests_dir.rstrip("/") or "/r2e_tests"):
            return True
        parts = norm.strip("/").split("/")
        if any(part in self._hidden_dir_names for part in parts):
            return True
        return norm in self._hidden_files or any(norm.startswith(f + "/") for f in self._hidden_files)

    def _guard_path(self, path: str, op: str) -> str:
        norm = self._rel(path)
        if not self._grading and self.is_hidden_path(path):
            raise HiddenPathError(f"{op} {path!r} refused: hidden tests of task {self.task.task_id} are only "
                                  "used at grading time")
        return norm

    def _hidden_markers(self) -> list[str]:
        markers = set(self._hidden_dir_names) | set(self._hidden_files)
        markers |= {posixpath.basename(f) for f in self._hidden_files if posixpath.basename(f) not in _GENERIC_BASENAMES}
        return sorted(markers)

    def _guard_command(self, cmd: str) -> None:
        if self._grading:
            return
        for marker in self._hidden_markers():
            if marker and marker in cmd:
                raise HiddenPathError(f"command refused: it mentions {marker!r}, a hidden test location of task "
                                      f"{self.task.task_id} (hidden tests are only used at grading time)")

    # ------------------------------------------------------------------ agent-facing operations
    def exec(self, cmd: str, timeout: float | None = None) -> ExecResult:
        """Run a shell command in the repo root; past ``timeout`` it is killed and reported as timed out."""
        self._require_started()
        self._guard_command(cmd)
        self.op_count += 1
        return self._exec_raw(cmd, timeout if timeout is not None else self.settings.exec_timeout, None)

    def read_file(self, path: str) -> str:
        self._require_started()
        rel = self._guard_path(path, "read")
        if rel.startswith("/"):
            raise SandboxError(f"{self.backend} sandbox: read {path!r} refused: only files of the repository "
                               f"({self.task.workdir}) can be read")
        self.op_count += 1
        try:
            data = self._get_bytes(rel)
        except FileNotFoundError:
            raise SandboxError(f"{self.backend} sandbox {self.where}: no such file {path!r}") from None
        return data.decode("utf-8", errors="replace")

    def write_file(self, path: str, content: str) -> None:
        self._require_started()
        rel = self._guard_path(path, "write")
        reason = unsafe_path_reason(rel) if not rel.startswith("/") else "absolute path outside the repository"
        if reason:
            raise SandboxError(f"{self.backend} sandbox: write {path!r} refused: {reason}")
        self.op_count += 1
        self._put_bytes(rel, content.encode("utf-8"))

    def list_files(self, pattern: str = "**/*.py") -> list[str]:
        """Repo files (tracked + untracked, .gitignore respected) matching a `**` glob, hidden tests excluded."""
        self._require_started()
        self.op_count += 1
        res = self._git("ls-files -z --cached --others --exclude-standard && printf '\\1' && "
                        "git ls-files -z --deleted", what="list files")
        present, _, deleted = res.stdout.partition("\x01")
        gone = set(deleted.split("\x00"))
        regex = glob_to_regex(pattern)
        files = {f for f in present.split("\x00") if f and f not in gone and regex.match(f)}
        return sorted(f for f in files if not self.is_hidden_path(f))

    def apply_patch(self, unified_diff: str) -> None:
        """Apply a unified diff: guard it, `git apply`, else `patch -p1 --fuzz=2`; PatchRejected names why."""
        self._require_started()
        files = check_patch(unified_diff)
        for path in files:
            self._guard_path(path, "patch")
        self.op_count += 1
        self._apply_diff(unified_diff, _PATCH_FILE, what="patch")

    def _apply_diff(self, diff: str, patch_file: str, what: str) -> None:
        text = diff if diff.endswith("\n") else diff + "\n"
        self._put_bytes(patch_file, text.encode("utf-8"))
        quoted = shlex.quote(patch_file)
        try:
            git_res = self._exec_raw(f"git apply --whitespace=nowarn {quoted}", self.settings.exec_timeout, None)
            if git_res.ok:
                return
            fallback = self._exec_raw(
                "command -v patch >/dev/null || { echo 'patch(1) is not installed'; exit 127; }; "
                f"patch -p1 --batch --fuzz=2 --forward --no-backup-if-mismatch --reject-file=- --dry-run -i {quoted}"
                f" && patch -p1 --batch --fuzz=2 --forward --no-backup-if-mismatch --reject-file=- -i {quoted}",
                self.settings.exec_timeout, None)
            if fallback.ok:
                return
        finally:
            self._exec_raw(f"rm -f {quoted}", self.settings.exec_timeout, None)
        raise PatchRejected(
            f"{what} does not apply in {self.where} (files: {', '.join(touched_files(diff))}):\n"
            f"git apply: {git_res.output.strip()[-1200:]}\npatch -p1: {fallback.output.strip()[-1200:]}")

    def _exclude_hidden_pathspecs(self) -> str:
        specs = [f"':(exclude){d}'" for d in sorted(self._hidden_dir_names)]
        specs += [shlex.quote(f":(exclude){f}") for f in sorted(self._hidden_files)]
        return " ".join(specs)

    def diff(self) -> str:
        """The agent's change against the base commit (new files included, hidden tests excluded)."""
        self._require_started()
        res = self._git(f"add -A && git diff --cached --no-color --no-ext-diff {self.base_commit} -- . "
                        f"{self._exclude_hidden_pathspecs()}", what="compute the diff")
        return res.stdout

    def snapshot(self) -> str:
        """Record the current tree (tracked + untracked, not ignored files) as a git tree object; returns its id."""
        self._require_started()
        tree = self._git("add -A && git write-tree", what="snapshot the tree").stdout.strip()
        if not _TREE_ID.match(tree):
            raise SandboxError(f"{self.backend} sandbox {self.where}: git write-tree returned {tree!r}")
        return tree

    def restore(self, snapshot_id: str) -> None:
        """Make the tree exactly the snapshot again: changed, deleted and new files all reverted."""
        self._require_started()
        if not _TREE_ID.match(snapshot_id):
            raise SandboxError(f"restore: {snapshot_id!r} is not a snapshot id returned by snapshot()")
        self._git(f"read-tree --reset -u {snapshot_id} && git clean -fdq", what=f"restore snapshot {snapshot_id}")
        self._clean_ignored()

    def _clean_ignored(self) -> None:
        """`git clean -x`, except the ignored files the sandbox started with (an image's build products:
        compiled extensions, egg-info): a file hidden in `__pycache__/` or `build/` by code that ran during a
        test run does not survive into the agent's tree."""
        listing = self._git("ls-files -z --others --ignored --exclude-standard", what="list ignored files")
        extra = sorted(p for p in listing.stdout.split("\x00") if p and p not in self._baseline_ignored)
        if not extra:
            return
        removal = "\x00".join(extra).encode("utf-8", "surrogateescape")
        self._put_bytes(_CLEAN_LIST_FILE, removal)
        self._git_script(f"xargs -0 -r rm -rf -- < {_CLEAN_LIST_FILE}; rm -f {_CLEAN_LIST_FILE}",
                         what="remove ignored files created since the start")

    # ------------------------------------------------------------------ grading
    def run_tests(self, selectors: list[str] | None = None) -> TestReport:
        """Grade the current tree: install hidden tests, run the task's test command, parse, grade by the
        task's mode (or, with ``selectors``, pass iff every selected test passes); the agent's tree is ALWAYS
        restored afterwards, hidden tests removed."""
        self._require_started()
        self.op_count += 1
        mode = "selectors" if selectors else self.task.grading_mode
        snap = self.snapshot()
        start = time.monotonic()
        self._grading = True
        try:
            if self._guard_runner is None:
                self._guard_runner = GuardRunner(self)
            guard_notes = self._guard_runner.run()
            error = self._install_hidden_tests()
            if error:
                return TestReport(resolved=False, mode=mode, error=error, seconds=time.monotonic() - start,
                                  guard=guard_notes)
            targets = list(selectors) if selectors else self.grading_targets()
            report = run_checked(self, targets, mode, start)
            report.guard = guard_notes
            return report
        finally:
            try:
                self._exec_raw(f"rm -rf {' '.join(sorted(self._hidden_dir_names))} .pytest_cache "
                               f"{shlex.quote(self._grading_dir)}",
                               self.settings.exec_timeout, None)
                self._clean_scratch()
                self.restore(snap)
            finally:
                self._grading = False

    def _grading_dir_parent(self) -> str:
        """Where a graded run keeps its recorder, record and output: outside the repository (and anything a patch
        controls); backends override (local: the sandbox's own root)."""
        return "/tmp"

    def _clean_scratch(self) -> None:
        """Remove what a test run left in the sandbox's scratch space (temp dirs), where a copy of a hidden test
        would otherwise outlive the run; backends override (default: nothing outside the repo to clean)."""

    def grade_fresh(self, diff: str) -> TestReport:
        """Grade ``diff`` in a NEW sandbox of this task (same backend and settings): the final verdict of an
        episode, immune to anything the episode's code left in this one. A diff that does not apply is graded
        unresolved with the reason."""
        mode = self.task.grading_mode
        fresh = self._fresh_sandbox()
        with fresh:
            if diff.strip():
                try:
                    fresh.apply_patch(diff)
                except PatchRejected as exc:
                    return TestReport(resolved=False, mode=mode, error=f"the final diff was rejected: {exc}")
            return fresh.run_tests()

    def _fresh_sandbox(self) -> ShellSandbox:
        return type(self)(self.task, self.settings, self.dataset_dir, self.run_id)

    def grading_targets(self) -> list[str]:
        """test_files plus the file of every graded pytest id they miss (graph_planner.grading.targets)."""
        return grading_targets(self.task)

    def _install_hidden_tests(self) -> str | None:
        """Put the hidden tests in place (test_patch / R2E files); returns an error message or None."""
        task = self.task
        if task.test_patch:
            files = touched_files(task.test_patch)
            in_base = [f for f in files if f not in self._hidden_files]
            reset = " ".join(shlex.quote(f) for f in in_base)
            if in_base:  # like the SWE-bench harness: agent edits to these test files do not count
                self._exec_raw(f"git checkout {self.base_commit} -- {reset} 2>/dev/null || true",
                               self.settings.exec_timeout, None)
            if self._hidden_files:
                self._exec_raw("rm -rf " + " ".join(shlex.quote(f) for f in sorted(self._hidden_files)),
                               self.settings.exec_timeout, None)
            try:
                self._apply_diff(task.test_patch, _TEST_PATCH_FILE, what=f"test_patch of task {task.task_id}")
            except PatchRejected as exc:
                return str(exc)
        for name, source in task.hidden_tests.items():
            reason = unsafe_path_reason(name)
            if reason:
                return f"hidden test name {name!r} of task {task.task_id}: {reason}"
            self._put_bytes(f"{R2E_TESTS_DIR}/{name}", source.encode("utf-8"))
        if not task.hidden_tests and self.hidden_tests_dir_in_sandbox and task.grading_mode == "r2e":
            src = shlex.quote(task.hidden_tests_dir.rstrip("/") + "/.")
            res = self._exec_raw(f"mkdir -p {R2E_TESTS_DIR} && cp -r {src} {R2E_TESTS_DIR}/",
                                 self.settings.exec_timeout, None)
            if not res.ok:
                return f"could not copy hidden tests from {task.hidden_tests_dir} in {self.where}: {res.output}"
        return None
