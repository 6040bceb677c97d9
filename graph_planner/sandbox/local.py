"""Local backend (the embedded default): a git working copy of the task's source tree in a temp dir, commands run
by subprocess in their own process group with a minimal environment, inside bubblewrap (read-only system,
writable copy only, no network) when it works here, else with only the network cut (`unshare -n`); see
graph_planner.sandbox.isolation and docs/security.md."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from graph_planner.episode.results import ExecResult
from graph_planner.sandbox.base import SandboxError
from graph_planner.sandbox.isolation import Isolation, choose_isolation, minimal_env
from graph_planner.sandbox.isolation import network_cut_prefix as network_cut_prefix  # re-exported for tests
from graph_planner.sandbox.local_copies import (
    COPY_IGNORED,
    copy_from_template,
    copy_tree,
    mark_owner,
    release_command,
    release_copy,
    track_command,
    track_copy,
)
from graph_planner.sandbox.output_cap import CappedOutput, command_output, start_pump
from graph_planner.sandbox.reaper import install_exit_cleanup
from graph_planner.sandbox.shell import ShellSandbox

if TYPE_CHECKING:
    from graph_planner.config.schema import SandboxConfig
    from graph_planner.data.record import TaskRecord

log = logging.getLogger(__name__)

TIMEOUT_RC = 124
_KILL_GRACE_S = 5.0


class LocalSandbox(ShellSandbox):
    """A temp-dir working copy of ``task.repo_path``; removed on close."""

    backend = "local"
    _warned: ClassVar[set[str]] = set()

    def __init__(self, task: TaskRecord, settings: SandboxConfig, dataset_dir: str | Path | None = None,
                 run_id: str = "local") -> None:
        super().__init__(task, settings, dataset_dir, run_id)
        self._root: Path | None = None
        self._repo: Path | None = None
        self._prefix: tuple[str, ...] = ()
        self.isolation: Isolation | None = None
        self._preamble = ""
        self._env: dict[str, str] = {}

    @property
    def where(self) -> str:
        return f"dir {self._repo}" if self._repo else f"(local, task {self.task.task_id}, not started)"

    @property
    def repo_dir(self) -> Path:
        if self._repo is None:
            raise SandboxError(f"local sandbox for task {self.task.task_id}: not started")
        return self._repo

    # ------------------------------------------------------------------ lifecycle
    def _start_backend(self) -> None:
        task = self.task
        source = task.resolve_repo_path(self.dataset_dir or Path.cwd())
        if source is None:
            raise SandboxError(
                f"task {task.task_id}: the local backend needs `repo_path` (a source tree relative to the dataset "
                f"file); this task only names image {task.image!r}: run it with --sandbox docker")
        if not source.is_dir():
            raise SandboxError(f"task {task.task_id}: repo_path {source} is not a directory "
                               f"(dataset dir {self.dataset_dir}); re-run `gp data prepare`")
        if shutil.which("git") is None:
            raise SandboxError("the local sandbox needs git on PATH (apt-get install git)")
        self._root = Path(tempfile.mkdtemp(prefix=f"gp-{self.run_id}-{task.safe_id}-"))
        track_copy(self._root)
        install_exit_cleanup()
        self._repo = self._root / "repo"
        try:
            mark_owner(self._root, self.run_id, task.task_id)
            has_git = (source / ".git").exists()
            # a plain tree is committed once per process (a verified template); a source's .git is copied only to
            # be trimmed to base_commit (history.py) right after
            from_template = not has_git and bool(task.base_commit)
            if from_template:
                self._copy_template(source)
            else:
                copy_tree(source, self._repo, ignore=shutil.ignore_patterns(*COPY_IGNORED))
            self._env = minimal_env(self._root, dict(task.env), self.settings.local_isolate_pytest_plugins)
            self._isolate()
            if not from_template:
                self._ensure_git_base(has_git=has_git)
        except BaseException:
            self._close_backend()
            raise

    def _clean_scratch(self) -> None:
        if self._root is not None:  # $TMPDIR and $HOME of task commands (under bwrap /tmp is per command anyway)
            for scratch in (self._root / "tmp", self._root / "home"):
                shutil.rmtree(scratch, ignore_errors=True)
                scratch.mkdir(exist_ok=True)

    def _grading_dir_parent(self) -> str:
        return str(self._root)  # beside the repository copy: writable under bwrap, never part of the diff

    def _close_backend(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            release_copy(self._root)
        self._root = None
        self._repo = None

    def _isolate(self) -> None:
        assert self._root is not None
        try:
            self.isolation = choose_isolation(self.settings.local_isolation, self._root, self.settings.network)
        except RuntimeError as exc:
            raise SandboxError(f"task {self.task.task_id}: {exc}") from None
        self._prefix = self.isolation.prefix
        ip_tool = shutil.which("ip")
        if self.isolation.kind == "netns" and ip_tool:
            # a fresh network namespace has loopback down: tests that serve on 127.0.0.1 need it up
            self._preamble = f"{ip_tool} link set lo up 2>/dev/null; "
        if self.isolation.kind != "bwrap" and self.isolation.kind not in LocalSandbox._warned:
            LocalSandbox._warned.add(self.isolation.kind)
            why = ("bubblewrap is not usable here" if self.settings.local_isolation == "auto"
                   else f"sandbox.local_isolation={self.settings.local_isolation}")
            log.warning("local sandbox isolates %s (%s); use --sandbox docker for untrusted patches",
                        self.isolation.isolates, why)

    def _ensure_git_base(self, has_git: bool) -> None:
        """HEAD must be the task base: an existing repo is checked out at base_commit; a plain tree becomes a
        deterministic repo (fixed identity and dates, so the same tree always gets the same commit id)."""
        task = self.task
        if has_git:
            if task.base_commit:
                self._git(f"checkout -q --detach {task.base_commit} && git clean -fdq",
                          what=f"check out base commit {task.base_commit} of task {task.task_id}")
            return
        from graph_planner.data.gitrepo import init_deterministic_repo

        self._check_base(init_deterministic_repo(self.repo_dir))

    def _copy_template(self, source: Path) -> None:
        """The plain source tree as a deterministic repo, committed once per process (a template), checked against
        base_commit."""
        from graph_planner.data.gitrepo import init_deterministic_repo

        assert self.task.base_commit and self._repo is not None
        self._check_base(copy_from_template(source, self.task.base_commit, self._repo, self.run_id,
                                            self.task.task_id, init_deterministic_repo))

    def _check_base(self, head: str) -> None:
        task = self.task
        if task.base_commit and head != task.base_commit:
            raise SandboxError(
                f"task {task.task_id}: the copy of {task.repo_path} commits as {head}, but the record's base_commit "
                f"is {task.base_commit}: the source tree is not the task's base (edited after `gp data prepare`?); "
                "re-run `gp data prepare`, or give repo_path a git checkout that contains base_commit")

    # ------------------------------------------------------------------ primitives
    def command_argv(self, cmd: str) -> tuple[list[str], dict[str, str]]:
        """(argv, env) of a task command as this sandbox runs it (isolation prefix, minimal environment), for a
        caller that keeps a process of its own in the sandbox (synth's pytest fork server: synth/runner.py); that
        caller starts it in its own session in ``repo_dir``, tracks it (local_copies.track_command) and kills it."""
        return [*self._prefix, "bash", "-c", self._preamble + cmd], dict(self._env)

    def _exec_raw(self, cmd: str, timeout: float, cwd: str | None = None) -> ExecResult:
        workdir = self.repo_dir if cwd is None else self._resolve(cwd)
        start = time.monotonic()
        argv, env = self.command_argv(cmd)
        proc = subprocess.Popen(argv, cwd=workdir, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        track_command(proc.pid)  # its own session: a signal to gp does not reach it, the exit cleanup kills it
        # each pipe read by a thread into a head + tail cap (output_cap), closed at its end: a command printing in
        # a loop costs bounded memory (communicate() kept everything)
        out, err = command_output(), command_output()
        assert proc.stdout is not None and proc.stderr is not None
        readers = [start_pump(proc.stdout, out), start_pump(proc.stderr, err)]
        try:
            if not _finish(proc, readers, start + timeout):
                self._kill_group(proc)
                # a grandchild that escaped the group may hold the pipes: what was read so far is kept, and its
                # reader closes the pipe when that grandchild ends
                _finish(proc, readers, time.monotonic() + _KILL_GRACE_S)
                note = f"\n[killed: command ran past its {timeout:g}s timeout]"
                return ExecResult(rc=TIMEOUT_RC, stdout=_text(out), stderr=_text(err) + note,
                                  seconds=time.monotonic() - start, timed_out=True)
        except BaseException:  # a signal (Terminated, Ctrl-C) while the command runs: it must not outlive us
            self._kill_group(proc)
            raise
        finally:
            release_command(proc.pid)
        return ExecResult(rc=proc.returncode, stdout=_text(out), stderr=_text(err), seconds=time.monotonic() - start)

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _resolve(self, path: str) -> Path:
        """A repo-relative path (or an absolute one inside the copy) → host path; symlink escapes refused."""
        repo = self.repo_dir
        target = Path(path) if path.startswith("/") else repo / path
        resolved = target.resolve()
        root = repo.resolve()
        if resolved != root and root not in resolved.parents:
            raise SandboxError(f"local sandbox {self.where}: {path!r} is outside the repository copy")
        return resolved

    def _put_bytes(self, path: str, data: bytes) -> None:
        target = self._resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def _get_bytes(self, path: str) -> bytes:
        target = self._resolve(path)
        if not target.is_file():
            raise FileNotFoundError(path)
        return target.read_bytes()


def _finish(proc: subprocess.Popen[bytes], readers: list[threading.Thread], deadline: float) -> bool:
    """communicate()'s condition by ``deadline``: both pipes read to their end and the process reaped."""
    for reader in readers:
        reader.join(max(0.0, deadline - time.monotonic()))
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return not any(reader.is_alive() for reader in readers)


def _text(output: CappedOutput) -> str:
    return output.getvalue().decode("utf-8", "replace")
