"""A private local Ray head for one training job, started and stopped by this process.

Why not ``ray.init()`` or ``ray start`` with defaults: on a shared machine other Ray clusters may run, and a
default ``ray.init()`` attaches to the most recently started one; ``ray stop`` (Ray 2.60) ends *every* Ray process
on the machine. The head here gets its own ``--temp-dir`` and ports, so nothing else can attach to it by accident,
and it is stopped through the processes it started: SIGTERM to the ``ray start --block`` process, then every
process whose command line names the head's temp dir (raylet, GCS, dashboard, workers), SIGKILL after a grace
period. Its resources: at least 4 logical CPUs (verl's placement bundle asks ``{"GPU": 1, "CPU": 3}``) and, on a
machine without CUDA, one *logical* GPU that verl's resource pool counts (the ``cpu`` platform of
:mod:`graph_planner.training.verl.cpu` runs the work). The head runs with Ray token auth: a fresh token per head
in a private 0700 dir that also holds its Ray temp dir (:mod:`graph_planner.integrations.ray_auth`), so no other
process of the host can submit to it; its dashboard listens on 127.0.0.1 only.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from graph_planner.integrations.ray_auth import PrivateRayAuth

log = logging.getLogger(__name__)

#: verl's colocated placement bundle is {"GPU": 1, "CPU": 3} plus the job driver and the agent-loop workers.
MIN_LOGICAL_CPUS = 4
START_TIMEOUT_S = 180.0
STOP_GRACE_S = 20.0


class RayHeadError(RuntimeError):
    """The local head did not start; the message names its log."""


#: Heads of this process that are up, by dashboard URL: a client for one of them sends its token.
_LIVE: dict[str, LocalRayHead] = {}


def head_headers(address: str) -> dict[str, str]:
    """The Authorization header for ``address`` when it is a private head of this process ({} otherwise)."""
    head = _LIVE.get(address.rstrip("/"))
    return head.auth.headers() if head is not None else {}


#: The ports a head is given (Ray picks any other at random): the GCS and dashboard first.
PORT_FLAGS = ("--port", "--dashboard-port", "--ray-client-server-port", "--dashboard-agent-listen-port",
              "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port",
              "--node-manager-port", "--object-manager-port")
#: What ``ray start`` says when a chosen port is taken (by another process since it was chosen, or given twice).
_PORT_CONFLICT = re.compile(r"port number \d+ that is used by other components|address already in use|"
                            r"failed to bind|is already in use", re.IGNORECASE)
#: Starts of a head whose own chosen ports turned out taken, before giving up.
PORT_ATTEMPTS = 3


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports on 127.0.0.1. Every socket stays bound until all are chosen: a port closed and
    asked for again can come straight back, and Ray refuses to start two components on one port (a CI failure:
    the GCS and the dashboard were both given 41883)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def local_gpu_count() -> int:
    """CUDA devices this machine has (0 without torch's CUDA build or a GPU)."""
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except ImportError:  # pragma: no cover - torch comes with the train extra
        return 0


@dataclass
class LocalRayHead:
    """``ray start --head --block`` as a child process; use as a context manager (stops on exit)."""

    num_cpus: int
    num_gpus: int
    log_path: Path
    auth: PrivateRayAuth = field(default_factory=PrivateRayAuth.create)
    temp_dir: Path = field(default=Path())  # Ray's temp dir: inside ``auth.root`` unless given
    dashboard_port: int = 0  # 0: chosen here, with every other port (distinct, retried when taken)
    gcs_port: int = 0
    process: subprocess.Popen[bytes] | None = None
    started_s: float = 0.0
    ports: dict[str, int] = field(default_factory=dict, init=False)  # flag -> port, as passed to ``ray start``
    _given: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.temp_dir == Path():
            self.temp_dir = self.auth.ray_temp_dir
        self._given = {flag: port for flag, port in (("--port", self.gcs_port), ("--dashboard-port",
                                                                                 self.dashboard_port)) if port}
        self._choose_ports()

    def _choose_ports(self) -> None:
        """Every port flag gets a distinct free port, except the ones the caller gave."""
        chosen = iter(free_ports(len(PORT_FLAGS) + len(self._given)))
        given = set(self._given.values())
        self.ports = {flag: self._given[flag] if flag in self._given else next(p for p in chosen if p not in given)
                      for flag in PORT_FLAGS}
        self.gcs_port, self.dashboard_port = self.ports["--port"], self.ports["--dashboard-port"]

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def logs_dir(self) -> Path:
        """Ray's own logs (job driver logs are ``job-driver-<job id>.log`` here while the head lives)."""
        return self.temp_dir / "session_latest" / "logs"

    def command(self) -> list[str]:
        ray_bin = Path(sys.executable).with_name("ray")
        cmd = [str(ray_bin), "start", "--head", "--block", "--num-cpus", str(self.num_cpus),
               "--num-gpus", str(self.num_gpus), "--dashboard-host", "127.0.0.1", "--temp-dir", str(self.temp_dir),
               "--disable-usage-stats", "--include-dashboard", "true"]
        for flag, port in self.ports.items():
            cmd += [flag, str(port)]
        return cmd

    def start(self, timeout_s: float = START_TIMEOUT_S) -> LocalRayHead:
        """Start the head and wait until its job API answers; raise RayHeadError (after cleanup) otherwise. A
        start that fails because a port chosen here was taken in between is tried again on new ports."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return self._start_once(timeout_s)
            except RayHeadError as exc:
                conflict = _PORT_CONFLICT.search(str(exc))
                if conflict is None or attempt == PORT_ATTEMPTS or self._given:
                    raise  # a port the caller gave stays as given
                log.warning("the local Ray head could not take its ports (%s); starting it again on new ports",
                            conflict.group(0))
                own_temp_dir = self.temp_dir == self.auth.ray_temp_dir
                self.auth = PrivateRayAuth.create()  # stop() removed the last one
                if own_temp_dir:
                    self.temp_dir = self.auth.ray_temp_dir
                self._choose_ports()
        raise AssertionError("unreachable")

    def _start_once(self, timeout_s: float) -> LocalRayHead:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        bin_dir = str(Path(sys.executable).parent)
        env = {**self.auth.process_env(), "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
               "RAY_USAGE_STATS_ENABLED": "0"}
        env.pop("RAY_ADDRESS", None)
        started = time.monotonic()
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(self.command(), env=env, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        log.info("starting a private Ray head (pid %d, temp dir %s, dashboard %s, %d CPUs, %d GPUs; log %s)",
                 self.process.pid, self.temp_dir, self.dashboard_url, self.num_cpus, self.num_gpus, self.log_path)
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.monotonic() - started
        _LIVE[self.dashboard_url] = self
        log.info("Ray head up in %.1f s", self.started_s)
        return self

    def client(self) -> Any:  # -> JobSubmissionClient
        """A job client that authenticates to this head."""
        from ray.job_submission import JobSubmissionClient

        return JobSubmissionClient(self.dashboard_url, headers=self.auth.headers())

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RayHeadError(f"the local Ray head exited with code {self.process.returncode} before it was "
                                   f"ready; see its log {self.log_path}:\n{self.log_tail()}")
            try:
                self.client().list_jobs()
                if self._node_alive():  # the dashboard answers before the raylet registers, and `ray start` gives
                    return  # up (exit) when that takes over 30 s: a loaded machine
                last = RuntimeError("the head's node has not registered yet")
            except Exception as exc:  # noqa: BLE001 - dashboard not up yet (connection refused, 5xx)
                last = exc
            time.sleep(1.0)
        raise RayHeadError(f"the local Ray head did not answer at {self.dashboard_url} within {timeout_s:.0f} s "
                           f"({last}); see its log {self.log_path}:\n{self.log_tail()}")

    def _node_alive(self) -> bool:
        from ray.util.state import StateApiClient
        from ray.util.state.common import ListApiOptions, StateResource

        client = StateApiClient(address=self.dashboard_url,
                                headers={"Content-Type": "application/json", **self.auth.headers()})
        nodes = client.list(StateResource.NODES, options=ListApiOptions(detail=False), raise_on_missing_output=False)
        return any(getattr(n, "state", None) == "ALIVE" for n in nodes)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def own_pids(self) -> list[int]:
        """Processes of this head: the ``ray start`` child and everything whose command line names its temp dir."""
        import psutil

        marker = str(self.temp_dir)
        pids = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                cmdline = proc.info["cmdline"] or []
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if proc.info["pid"] != os.getpid() and any(marker in part for part in cmdline):
                pids.append(int(proc.info["pid"]))
        if self.process is not None and self.process.poll() is None:
            pids.append(self.process.pid)
        return sorted(set(pids))

    def keep_job_log(self, job_id: str, dest_dir: Path) -> Path | None:
        """Copy ``job-driver-<job_id>.log`` out of the head's temp dir (which stop() deletes); returns the copy."""
        source = self.logs_dir / f"job-driver-{job_id}.log"
        if not source.is_file():
            return None
        dest_dir.mkdir(parents=True, exist_ok=True)
        target = dest_dir / source.name
        shutil.copyfile(source, target)
        return target

    def stop(self) -> list[int]:
        """Stop every process of this head (by PID, never ``ray stop``); returns the PIDs that needed SIGKILL."""
        import psutil

        _LIVE.pop(self.dashboard_url, None)
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        killed: list[int] = []
        pids = self.own_pids()
        procs = []
        for pid in pids:
            try:
                proc = psutil.Process(pid)
                proc.terminate()
                procs.append(proc)
            except psutil.NoSuchProcess:
                continue
        _, alive = psutil.wait_procs(procs, timeout=5)
        for proc in alive:
            try:
                proc.kill()
                killed.append(proc.pid)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5)
        if self.process is not None:
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        self.auth.remove()
        if killed:
            log.info("Ray head: SIGKILL for %s after SIGTERM", killed)
        return killed

    def __enter__(self) -> LocalRayHead:
        return self.start() if self.process is None else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
