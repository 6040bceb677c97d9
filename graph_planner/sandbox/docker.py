"""Docker backend: the task's image in a labelled, resource-limited container without network, driven through
one persistent bash session on the docker exec attach socket (~1 ms per command instead of `exec_run`'s
tens of ms), each command under `timeout -s KILL` so a runaway command is killed inside the container."""

from __future__ import annotations

import logging
import re
import select
import shlex
import struct
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker.errors  # also binds `docker`
import requests

from graph_planner.data.record import BUILT_HERE_HINT, built_here
from graph_planner.episode.results import ExecResult
from graph_planner.sandbox.base import SandboxError
from graph_planner.sandbox.history import SAFE_GIT_ENV
from graph_planner.sandbox.output_cap import CappedOutput, command_output
from graph_planner.sandbox.reaper import install_signal_reaper, owner_labels
from graph_planner.sandbox.shell import ShellSandbox

if TYPE_CHECKING:
    from graph_planner.config.schema import SandboxConfig
    from graph_planner.data.record import TaskRecord

log = logging.getLogger(__name__)

TIMEOUT_RC = 124
#: Extra seconds the host waits past a command's timeout before it declares the session broken (the in-container
#: `timeout` normally kills the command first; this covers a wedged shell or a huge output still streaming).
HOST_GRACE_S = 30.0
#: Longer scripts go through a file: one argv string is limited to 128 KiB (MAX_ARG_STRLEN).
MAX_INLINE_SCRIPT = 100_000
_FRAME_HEADER = struct.Struct(">BxxxL")
_STDOUT, _STDERR = 1, 2
_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")
#: Made when the container starts: what a test run leaves in /tmp after it is removed (_clean_scratch).
_START_MARK = "/tmp/.gp-start"

# The session's helpers. Requests are a header line plus exactly N raw bytes (no quoting needed). Every reply
# ends with "\n<token> <rc>\n" on stdout and on stderr, so both streams are known to be complete. A command's
# stdin is /dev/null: it must never eat the protocol.
_PRELUDE = r"""
__gp_buf=$(mktemp /tmp/.gp-buf.XXXXXX) || exit 97
__gp_end() { printf '\n%s %d\n' "$1" "$2" >&2; printf '\n%s %d\n' "$1" "$2"; }
__gp_run() {  # token timeout nbytes dir  <- script bytes (read by the builtin: no extra process)
  local s=
  LC_ALL=C IFS= read -r -d '' -N "$3" s
  cd -- "$4" || { __gp_end "$1" 1; return; }
  # stderr of the shell itself goes to /dev/null meanwhile: no "Killed" job notice in the command's stderr
  { timeout -s KILL "$2" bash -c "$s" 2>&3 3>&- </dev/null; } 3>&2 2>/dev/null
  __gp_end "$1" $?
}
__gp_runf() {  # token timeout nbytes dir  <- script bytes, too long for one argv string: via a file
  head -c "$3" > "$__gp_buf"
  cd -- "$4" || { __gp_end "$1" 1; return; }
  { timeout -s KILL "$2" bash "$__gp_buf" 2>&3 3>&- </dev/null; } 3>&2 2>/dev/null
  __gp_end "$1" $?
}
__gp_put() {  # token nbytes dir path  <- file bytes; `cat >` keeps the mode of an existing file
  head -c "$2" > "$__gp_buf"
  ( cd -- "$3" && __gp_inside "$4" && mkdir -p -- "$(dirname -- "$4")" && cat -- "$__gp_buf" > "$4" ) </dev/null
  __gp_end "$1" $?
}
__gp_inside() {  # path: true when it resolves (links followed) inside the current dir; never writes/reads via links out
  local r t; r=$(realpath -e .) && t=$(realpath -m -- "$1") || return 66
  case "$t/" in "$r"/*) return 0;; esac
  echo "refused: $1 resolves to $t, outside the repository" >&2; return 67
}
printf '__gp_ready__ %d\n' "$$"
"""


class _SessionBroken(Exception):
    """The shell session stopped answering (EOF, socket error, or past the host deadline)."""

    def __init__(self, message: str, deadline_passed: bool = False) -> None:
        super().__init__(message)
        self.deadline_passed = deadline_passed


class ShellSession:
    """One long-lived `bash` in a container, spoken to over the exec attach socket (multiplexed frames)."""

    def __init__(self, api: Any, container_id: str, workdir: str, env: dict[str, str]) -> None:
        self.api = api
        self.container_id = container_id
        exec_id = api.exec_create(container_id, ["bash", "--noprofile", "--norc"], stdin=True, stdout=True,
                                  stderr=True, tty=False, workdir=workdir, environment=env)["Id"]
        self._response = api.exec_start(exec_id, socket=True)
        self._sock = getattr(self._response, "_sock", self._response)
        self._rx = bytearray()
        self.pid: int | None = None
        self._send(_PRELUDE.encode())
        out, _ = self._read_until(b"__gp_ready__ ", time.monotonic() + 60.0, both=False)
        self.pid = int(out.split()[-1])

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise _SessionBroken(f"write to the shell failed: {exc}") from None

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _SessionBroken("no answer before the deadline", deadline_passed=True)
        ready, _, _ = select.select([self._sock], [], [], remaining)
        if not ready:
            raise _SessionBroken("no answer before the deadline", deadline_passed=True)
        try:
            chunk = self._sock.recv(1 << 16)
        except OSError as exc:
            raise _SessionBroken(f"read from the shell failed: {exc}") from None
        if not chunk:
            raise _SessionBroken("the shell closed its output (exited or was killed)")
        self._rx += chunk

    def _frames(self) -> list[tuple[int, bytes]]:
        frames = []
        while len(self._rx) >= _FRAME_HEADER.size:
            stream, size = _FRAME_HEADER.unpack_from(self._rx)
            if len(self._rx) < _FRAME_HEADER.size + size:
                break
            frames.append((stream, bytes(self._rx[_FRAME_HEADER.size:_FRAME_HEADER.size + size])))
            del self._rx[:_FRAME_HEADER.size + size]
        return frames

    def _read_until(self, marker: bytes, deadline: float, both: bool = True,
                    capped: bool = True) -> tuple[bytes, bytes]:
        """Collect stdout/stderr until ``marker`` followed by a line end is seen on stdout (and on stderr when
        ``both``); returns each stream up to its marker, the marker line included. ``capped``: each stream keeps
        only its head and tail (output_cap.command_output; a command printing in a loop must not fill the host's
        memory); file contents and archives are read uncapped."""
        sinks = {s: command_output() if capped else CappedOutput(sys.maxsize, 0) for s in (_STDOUT, _STDERR)}
        held = {_STDOUT: bytearray(), _STDERR: bytearray()}  # not yet in its sink: may hold a partial marker line
        keep = len(marker) + 32  # the marker and the exit status after it
        ends: dict[int, bytes] = {}  # stream -> its marker line (kept out of the cap)
        needed = {_STDOUT, _STDERR} if both else {_STDOUT}
        while not needed <= ends.keys():
            self._fill(deadline)
            for stream, data in self._frames():
                if stream not in held or stream in ends:
                    continue  # output after a marker belongs to a background process: dropped
                buf = held[stream]
                buf += data
                at = buf.find(marker)
                if at < 0 and len(buf) > keep:
                    sinks[stream].write(bytes(buf[:-keep]))
                    del buf[:-keep]
                elif at >= 0:
                    sinks[stream].write(bytes(buf[:at]))
                    del buf[:at]
                    line_end = buf.find(b"\n", len(marker))
                    if line_end >= 0:
                        ends[stream] = bytes(buf[:line_end + 1])
        return (sinks[_STDOUT].getvalue() + ends[_STDOUT],
                sinks[_STDERR].getvalue() + ends[_STDERR] if _STDERR in ends else b"")

    def drain(self) -> None:
        """Discard output that arrived between requests (a background process still writing) and raise
        _SessionBroken when the shell is gone, so a dead idle session is noticed before a command is sent."""
        while select.select([self._sock], [], [], 0)[0]:
            try:
                chunk = self._sock.recv(1 << 16)
            except OSError as exc:
                raise _SessionBroken(f"read from the shell failed: {exc}") from None
            if not chunk:
                raise _SessionBroken("the shell closed its output (exited or was killed)")
            self._rx += chunk
            self._frames()
        self._frames()

    def request(self, header: str, payload: bytes, deadline: float, capped: bool = True) -> tuple[int, bytes, bytes]:
        """Send one request (header names the helper and its args after the token) and wait for its reply
        (``capped``: see _read_until)."""
        token = f"__gp_{uuid.uuid4().hex}__"
        self._send(f"{header.replace('TOKEN', token, 1)}\n".encode() + payload)
        marker = f"\n{token} ".encode()
        out, err = self._read_until(marker, deadline, capped=capped)
        rc_line = out[out.rfind(marker) + len(marker):].strip()
        return int(rc_line), out[:out.rfind(marker)], err[:err.rfind(marker)]

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
        close_response = getattr(self._response, "close", None)
        if callable(close_response):
            close_response()


def docker_client(timeout: float = 120.0) -> docker.DockerClient:
    """docker.from_env() with a message that says how to get an engine when none answers."""
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(
            f"no Docker engine answers ({exc}); start one (as root: `bash scripts/docker-up.sh`, then "
            "`source .cache/docker/env.sh`) or point DOCKER_HOST at it, or use --sandbox local") from None
    return client


class DockerSandbox(ShellSandbox):
    """The task's image (``task.image``) as a container; the repository is at ``task.workdir``."""

    backend = "docker"
    hidden_tests_dir_in_sandbox = True  # R2E images keep their hidden tests at /r2e_tests

    def __init__(self, task: TaskRecord, settings: SandboxConfig, dataset_dir: str | Path | None = None,
                 run_id: str = "local", client: docker.DockerClient | None = None) -> None:
        super().__init__(task, settings, dataset_dir, run_id)
        self._client = client
        self.container: Any = None
        self._session: ShellSession | None = None
        self._lock = threading.RLock()

    @property
    def where(self) -> str:
        name = self.container.name if self.container is not None else "(not started)"
        return f"container {name} (image {self.task.image}, task {self.task.task_id})"

    # ------------------------------------------------------------------ lifecycle
    def _start_backend(self) -> None:
        task, settings = self.task, self.settings
        if not task.image:
            raise SandboxError(f"task {task.task_id}: the docker backend needs `image`; build it with "
                               "`gp images build DATASET` or use --sandbox local")
        client = self._client = self._client or docker_client()
        self._ensure_image(client, task.image)
        install_signal_reaper(self.run_id)
        name = _NAME_UNSAFE.sub("-", f"gp-{self.run_id}-{task.safe_id}"[:100]) + "-" + uuid.uuid4().hex[:8]
        try:
            self.container = client.containers.run(
                task.image, entrypoint=["sleep", "infinity"], detach=True, name=name, init=True,
                labels=owner_labels(self.run_id, task.task_id), working_dir=task.workdir,
                network_disabled=not settings.network, nano_cpus=int(settings.cpus * 1e9),
                mem_limit=settings.memory, pids_limit=settings.pids_limit, environment=dict(task.env))
        except docker.errors.DockerException as exc:
            self._remove_container(client, name)
            raise SandboxError(f"could not start container {name} from image {task.image} for task "
                               f"{task.task_id}: {exc}") from None
        try:
            self._open_session()
            self._exec_raw(f"touch {_START_MARK}", self.settings.exec_timeout, None)
            self._check_workdir()
        except BaseException:
            self._close_backend()
            raise

    def _ensure_image(self, client: docker.DockerClient, image: str) -> None:
        try:
            client.images.get(image)
            return
        except docker.errors.ImageNotFound:
            pass
        if built_here(image):  # no registry has it: a pull would only wait on Docker Hub and fail
            raise SandboxError(f"image {image} of task {self.task.task_id} is not present: {BUILT_HERE_HINT}")
        log.info("image %s not present: pulling it (prepull images ahead with `gp images prepull`)", image)
        try:
            client.images.pull(image)
        except docker.errors.DockerException as exc:
            raise SandboxError(
                f"image {image} of task {self.task.task_id} is not present and could not be pulled ({exc}); "
                "build sample/custom images with `gp images build DATASET` or prepull with `gp images prepull`"
            ) from None

    def _fresh_sandbox(self) -> DockerSandbox:
        return DockerSandbox(self.task, self.settings, self.dataset_dir, self.run_id, client=self._client)

    def _clean_scratch(self) -> None:
        """Files a test run created in the container's /tmp (the session's own buffer excepted)."""
        self._exec_raw(f"find /tmp /var/tmp -mindepth 1 -newer {_START_MARK} ! -name '.gp-*' -delete 2>/dev/null; true",
                       self.settings.exec_timeout, None)

    def _check_workdir(self) -> None:
        res = self._exec_raw("git rev-parse HEAD", self.settings.exec_timeout, None)
        if not res.ok:
            raise SandboxError(f"{self.where}: {self.task.workdir} is not a git repository at the task base "
                               f"({res.output.strip()[-400:]}); rebuild the image with `gp images build`")
        head = res.stdout.strip()
        base = self.task.base_commit
        if base and head != base:
            # an image shared by several tasks (a synth task repository: images.TASK_REFS) holds every task's
            # commit: check this task's out; the history trim that follows drops the other tasks' objects
            quoted = shlex.quote(base)
            moved = self._exec_raw(f"git cat-file -e {quoted}^{{commit}} && git checkout -q --detach {quoted} && "
                                   "git clean -fdq", self.settings.exec_timeout, None)
            if not moved.ok:
                log.warning("task %s: %s has HEAD %s, the record says base_commit %s", self.task.task_id,
                            self.where, head, base)

    def _open_session(self) -> None:
        env = {**SAFE_GIT_ENV, "LC_ALL": "C.UTF-8", **self.task.env}
        try:
            self._session = ShellSession(self._client.api, self.container.id, self.task.workdir, env)
        except (_SessionBroken, OSError, ValueError) as exc:
            raise SandboxError(f"{self.where}: could not open a shell session (is bash in the image?): {exc}") \
                from None

    def _drop_session(self) -> None:
        """Forget a broken session; its bash (and anything it still runs) is killed inside the container."""
        session, self._session = self._session, None
        if session is None:
            return
        session.close()
        if session.pid and self.container is not None:
            try:
                self.container.exec_run(["sh", "-c", f"kill -9 {session.pid}"])  # kill(1) may be absent
            except (docker.errors.DockerException, requests.RequestException) as exc:
                # the container may be gone; the next command reports that
                log.debug("could not kill shell pid %s in %s: %s", session.pid, self.where, exc)

    def _close_backend(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None
            if self.container is not None and self._client is not None:
                self._remove_container(self._client, self.container.name)
            self.container = None

    @staticmethod
    def _remove_container(client: docker.DockerClient, name: str) -> None:
        try:
            client.containers.get(name).remove(force=True)
        except docker.errors.NotFound:
            pass
        except (docker.errors.DockerException, requests.RequestException) as exc:
            # the engine may be gone (requests.ConnectionError): say so; the episode's own error names the cause
            log.warning("could not remove container %s: %s (`gp sandbox reap` will)", name, exc)

    # ------------------------------------------------------------------ primitives
    def _cwd(self, cwd: str | None) -> str:
        workdir = self.task.workdir
        if cwd is None:
            return workdir
        return cwd if cwd.startswith("/") else f"{workdir.rstrip('/')}/{cwd}"

    def _request(self, header: str, payload: bytes, deadline: float, what: str,
                 capped: bool = True) -> tuple[int, bytes, bytes]:
        with self._lock:
            if self.container is None:
                raise SandboxError(f"docker sandbox for task {self.task.task_id}: not started")
            if self._session is not None:
                try:
                    self._session.drain()
                except _SessionBroken as exc:
                    log.warning("%s: shell session lost while idle (%s); starting a new one", self.where, exc)
                    self._drop_session()
            if self._session is None:
                self._open_session()
            assert self._session is not None
            try:
                return self._session.request(header, payload, deadline, capped)
            except _SessionBroken as exc:
                self._drop_session()
                if exc.deadline_passed:
                    raise
                raise SandboxError(f"{self.where}: the shell session broke during {what}: {exc} "
                                   f"(container status: {self._container_status()})") from None

    def _container_status(self) -> str:
        try:
            self.container.reload()
            state = self.container.attrs.get("State", {})
            return f"{state.get('Status')}, OOMKilled={state.get('OOMKilled')}"
        except (docker.errors.DockerException, requests.RequestException) as exc:
            return f"unknown ({exc})"

    def _run_script(self, cmd: str, timeout: float, cwd: str | None, what: str,
                    capped: bool = True) -> tuple[int, bytes, bytes]:
        """One command through the session; raises _SessionBroken when the host deadline passed. ``capped``: its
        output keeps only head and tail (a task command), else all of it (a file's bytes, an archive)."""
        script = cmd.encode("utf-8")
        helper = "__gp_run" if len(script) <= MAX_INLINE_SCRIPT else "__gp_runf"
        header = f"{helper} TOKEN {max(timeout, 0.01):.3f} {len(script)} {shlex.quote(self._cwd(cwd))}"
        return self._request(header, script, time.monotonic() + timeout + HOST_GRACE_S, what, capped)

    def _exec_raw(self, cmd: str, timeout: float, cwd: str | None = None) -> ExecResult:
        start = time.monotonic()
        try:
            rc, out, err = self._run_script(cmd, timeout, cwd, f"`{cmd[:200]}`")
        except _SessionBroken:
            return ExecResult(rc=TIMEOUT_RC, stdout="", timed_out=True, seconds=time.monotonic() - start,
                              stderr=f"[killed: no answer within {timeout:g}s + {HOST_GRACE_S:g}s; shell restarted]")
        seconds = time.monotonic() - start
        stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        if rc == 128 + 9 and seconds >= timeout:  # `timeout -s KILL` killed the command's process group
            return ExecResult(rc=TIMEOUT_RC, stdout=stdout, timed_out=True, seconds=seconds,
                              stderr=stderr + f"[killed: command ran past its {timeout:g}s timeout]")
        return ExecResult(rc=rc, stdout=stdout, stderr=stderr, seconds=seconds)

    def _put_bytes(self, path: str, data: bytes) -> None:
        header = f"__gp_put TOKEN {len(data)} {shlex.quote(self.task.workdir)} {shlex.quote(path)}"
        deadline = time.monotonic() + self.settings.exec_timeout
        try:
            rc, _, err = self._request(header, data, deadline, f"write {path}")
        except _SessionBroken as exc:
            raise SandboxError(f"{self.where}: writing {path} timed out ({exc})") from None
        if rc != 0:
            raise SandboxError(f"{self.where}: could not write {path}: {err.decode('utf-8', 'replace').strip()}")

    def _get_bytes(self, path: str) -> bytes:
        quoted = shlex.quote(path)
        # links are followed only while they stay in the repository (a link to /etc/passwd or a host dir is refused)
        inside = (f"r=$(realpath -e .) && t=$(realpath -m -- {quoted}) || exit 66; "
                  'case "$t/" in "$r"/*) ;; *) exit 67;; esac; ')
        res = self._raw_output(f"test -f {quoted} || exit 66; {inside}cat -- {quoted}", f"read {path}")
        if res[0] == 66:
            raise FileNotFoundError(path)
        if res[0] == 67:
            raise SandboxError(f"{self.where}: read {path!r} refused: it is a link that leads out of the repository")
        if res[0] != 0:
            raise SandboxError(f"{self.where}: could not read {path}: {res[2].decode('utf-8', 'replace')}")
        return res[1]

    def _raw_output(self, cmd: str, what: str) -> tuple[int, bytes, bytes]:
        """Run a command in the repo root and keep its output as bytes (file contents, archives)."""
        try:
            return self._run_script(cmd, self.settings.exec_timeout, None, what, capped=False)
        except _SessionBroken as exc:
            raise SandboxError(f"{self.where}: {what} timed out ({exc})") from None

    def _get_tree_archive(self, paths: list[str] | None = None) -> bytes:
        """A tar (uncompressed) of repository files in one round trip: ``paths`` (repo-relative), or every
        tracked + untracked, not ignored file. Hidden test locations are refused / left out."""
        if paths is None:
            paths = self.list_files("**")
        rels = [self._guard_path(p, "read") for p in paths]
        if not rels:
            return self._raw_output("tar -cf - -T /dev/null", "archive no files")[1]
        listing = " ".join(shlex.quote(p) for p in rels)
        rc, out, err = self._raw_output(f"printf '%s\\0' {listing} | tar --null -T - -cf -", "archive the tree")
        if rc != 0:
            raise SandboxError(f"{self.where}: could not archive {len(rels)} file(s): "
                               f"{err.decode('utf-8', 'replace').strip()[-600:]}")
        return out

    def read_files(self, paths: list[str]) -> dict[str, str]:
        """Many files at once (one archive round trip), e.g. for building the code graph."""
        import io
        import tarfile

        self._require_started()
        self.op_count += 1
        files: dict[str, str] = {}
        with tarfile.open(fileobj=io.BytesIO(self._get_tree_archive(paths)), mode="r:") as tar:
            for member in tar:
                if member.isfile():
                    handle = tar.extractfile(member)
                    if handle is not None:
                        files[member.name] = handle.read().decode("utf-8", "replace")
        return files
