"""A pytest fork server in a started local sandbox: the test runs of synthesis without a Python start per run.

A synthesis run judges hundreds of candidate trees of one small repository; a full graded ``run_tests`` costs a
bash, a Python start, ``import pytest`` and a few git / guard commands per run, several times what the tests of a
small suite cost. The server is one Python process, started in the sandbox (same isolation prefix, environment
and working copy as every task command), that imports pytest once; each run is a fork of it that starts its own
session, calls ``pytest.main(["-rA", "-p", "no:cacheprovider", ...])`` with its output in a file beside the copy,
and exits. The repository's own modules are imported only in the fork, so every run sees the tree as it is on
disk, exactly as a fresh ``python -m pytest -rA`` would. Statuses come from the graders' own log parser
(grading/parse.py), so a run here and a graded run of the same tree agree.

The server enforces the run's timeout (the fork's whole process group is killed); the host kills the server's
group when it does not answer within the timeout plus a grace. After each run the server lists what git sees as
changed (ignored files included): the caller restores the sandbox's snapshot when a run left anything behind.
The grader's tamper checks (canaries, recorder, guard) are not part of these runs: the trees judged here are the
repository's own code with one edit made by the modifiers, and every written task is graded for real by
``gp validate-tasks``.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

from graph_planner.episode.results import TestReport
from graph_planner.grading.graded_command import HEAD_BYTES, TAIL_BYTES
from graph_planner.grading.parse import parse_test_log
from graph_planner.sandbox.base import SandboxError
from graph_planner.sandbox.local import LocalSandbox
from graph_planner.sandbox.local_copies import release_command, track_command
from graph_planner.sandbox.output_cap import standalone_source

_GRACE_S = 10.0
# The test output goes through a pipe into a head + tail cap (output_cap.py, its source run here: the sandbox's
# Python may not import graph_planner) and only that reaches the log file: a test printing in a loop cannot fill
# the disk. The sizes come in every request (the graded run's HEAD_BYTES / TAIL_BYTES).
_SERVER = standalone_source() + r"""
import json, os, signal, subprocess, sys, time
sys.dont_write_bytecode = True
import pytest
ready = {"ready": True}
sys.stdout.write(json.dumps(ready) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    req = json.loads(line)
    start = time.monotonic()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.close(r)
        os.dup2(w, 1); os.dup2(w, 2); os.close(w)
        null = os.open(os.devnull, os.O_RDONLY); os.dup2(null, 0); os.close(null)
        sys.stdin = open(0); sys.stdout = open(1, "w", buffering=1); sys.stderr = open(2, "w", buffering=1)
        rc = 3
        trace = req.get("trace")
        if trace:  # the executed-lines trace (coverage.py): every line of a file under the repository that runs
            import threading
            root, hits = os.getcwd(), {}
            def tracer(frame, event, arg):
                name = frame.f_code.co_filename
                if name.startswith("<"):
                    return None
                path = name if os.path.isabs(name) else os.path.join(root, name)
                if not path.startswith(root + os.sep):
                    return None
                lines = hits.setdefault(os.path.relpath(path, root), set())
                lines.add(frame.f_lineno)
                def local(frame, event, arg):
                    if event == "line":
                        lines.add(frame.f_lineno)
                    return local
                return local
            threading.settrace(tracer)
            sys.settrace(tracer)
        try:
            rc = int(pytest.main(["-rA", "-p", "no:cacheprovider", *req["targets"]]))
            if trace:
                sys.settrace(None)
                with open(trace, "w") as handle:
                    json.dump({k: sorted(v) for k, v in hits.items()}, handle)
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(rc)
    os.close(w)
    log = CappedOutput(req["head"], req["tail"])
    reader = start_pump(os.fdopen(r, "rb"), log)
    deadline = start + req["timeout"]
    status, timed_out, pause = None, False, 0.002
    while status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        elif time.monotonic() >= deadline:
            timed_out = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            status = os.waitpid(pid, 0)[1]
        else:
            time.sleep(pause); pause = min(pause * 2, 0.02)
    try:
        os.killpg(pid, signal.SIGKILL)  # what the tests left running
    except (ProcessLookupError, PermissionError):
        pass
    reader.join(2.0)  # a process that left the session may hold the pipe: what came by then is the log
    fd = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(log.getvalue())
    seconds = time.monotonic() - start
    changed = subprocess.run(["git", "status", "--porcelain", "-z", "--ignored", "--untracked-files=all"],
                             capture_output=True, text=True).stdout
    sys.stdout.write(json.dumps({"rc": os.waitstatus_to_exitcode(status), "timed_out": timed_out,
                                 "seconds": seconds, "changed": [c for c in changed.split("\0") if c]}) + "\n")
    sys.stdout.flush()
"""


def _tail(log: str) -> str:
    """pytest's FAILED / ERROR summary lines (where the symptoms are read) and the end of the log."""
    summary = [line for line in log.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return "\n".join(summary[:200]) + "\n" + log[-2000:]


class ForkRunner:
    """The fork server of one started LocalSandbox; ``run`` gives a TestReport of the tree as it is now."""

    def __init__(self, box: LocalSandbox, python: str = "python") -> None:
        self.box = box
        self._log = box.repo_dir.parent / f"synth-run-{uuid.uuid4().hex[:8]}.log"
        self._python = python
        self._proc: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()  # ends the thread that started the server (see _spawn)
        self.changed: list[str] = []  # what the last run left changed in the tree (git status --porcelain)

    def _start(self) -> subprocess.Popen[bytes]:
        argv, env = self.box.command_argv(f"exec {self._python} -c {shlex.quote(_SERVER)}")
        proc = self._spawn(argv, env)
        track_command(proc.pid)
        self._proc = proc
        reply = self._read(proc, self.box.settings.exec_timeout)
        if reply is None or not reply.get("ready"):
            self.close()
            raise SandboxError(f"the pytest fork server did not start in {self.box.where}: `import pytest` "
                               "failed for the sandbox's python (not installed, or a module of the repository "
                               "named pytest shadows it)")
        return proc

    def _spawn(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Start the server from a thread of its own that lives until ``close``: bubblewrap's --die-with-parent
        (PR_SET_PDEATHSIG) kills the server when the *thread* that started it ends, and callers run in pool
        threads that end before the server should."""
        started: list[subprocess.Popen[bytes] | BaseException] = []
        ready, stop = threading.Event(), threading.Event()

        def owner() -> None:
            try:
                started.append(subprocess.Popen(argv, cwd=self.box.repo_dir, env=env, stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                                start_new_session=True))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                started.append(exc)
            ready.set()
            stop.wait()

        threading.Thread(target=owner, name="synth-fork-server", daemon=True).start()
        ready.wait()
        if isinstance(started[0], BaseException):
            raise started[0]
        self._stop = stop
        return started[0]

    @staticmethod
    def _read(proc: subprocess.Popen[bytes], timeout: float) -> dict | None:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = proc.stdout.readline()
        if not line:
            return None
        try:
            return json.loads(line)
        except ValueError:
            return None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (a new one after a restart)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def executed_lines(self, timeout: float) -> dict[str, set[int]] | None:
        """repo-relative path -> line numbers the suite executes (one traced run), or None when the traced run gave
        no result (the filter is then simply off)."""
        trace = self._log.with_suffix(".trace.json")
        trace.unlink(missing_ok=True)
        report = self.run(timeout, trace=trace)
        try:
            data = json.loads(trace.read_text(encoding="utf-8")) if not report.timed_out else None
        except (OSError, ValueError):
            data = None
        finally:
            trace.unlink(missing_ok=True)
        if not isinstance(data, dict):
            return None
        return {str(path): {int(n) for n in lines} for path, lines in data.items()}

    def run(self, timeout: float, trace: Path | None = None) -> TestReport:
        """Run the suite once (``-rA``, every test pytest collects) in a fork; statuses from the graders' parser.
        With ``trace``, the fork records the lines it executes there (``executed_lines``)."""
        proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
        assert proc.stdin is not None
        start = time.monotonic()
        request = {"targets": [], "timeout": timeout, "out": str(self._log), "trace": str(trace) if trace else None,
                   "head": HEAD_BYTES, "tail": TAIL_BYTES}
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            reply = self._read(proc, timeout + _GRACE_S)
        except BrokenPipeError:
            reply = None
        if reply is None:  # the server hangs or died: a fresh one next time
            self.close()
            self.changed = ["?? (the fork server stopped answering)"]
            return TestReport(resolved=False, mode="selectors", seconds=time.monotonic() - start, timed_out=True,
                              error=f"the pytest fork server gave no answer within {timeout + _GRACE_S:g}s")
        self.changed = list(reply.get("changed", []))
        log = self._log.read_text(encoding="utf-8", errors="replace") if self._log.is_file() else ""
        timed_out = bool(reply.get("timed_out"))
        statuses = parse_test_log(log) if log else {}
        return TestReport(resolved=False, mode="selectors", statuses=statuses, rc=int(reply.get("rc", 1)),
                          seconds=float(reply.get("seconds", time.monotonic() - start)), timed_out=timed_out,
                          log_tail=_tail(log),
                          error=f"test command timed out after {timeout:g}s" if timed_out else None)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        self._stop.set()
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        proc.wait()
        release_command(proc.pid)
        Path(self._log).unlink(missing_ok=True)

    def __enter__(self) -> ForkRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
