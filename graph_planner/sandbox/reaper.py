"""Container labels and the reaper: every docker sandbox container says which run, task and process own it, so
containers of runs that are gone (crash, SIGKILL, lost node) can be found and removed, and a run removes its own
at exit and on SIGTERM."""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

LABEL_RUN = "graph-planner.run-id"
LABEL_TASK = "graph-planner.task-id"
LABEL_OWNER_PID = "graph-planner.owner-pid"
LABEL_HOST = "graph-planner.host"
#: Start time of the owner process (clock ticks since boot, /proc/<pid>/stat field 22): a recycled pid is not
#: mistaken for a live owner.
LABEL_OWNER_START = "graph-planner.owner-start"


def process_start_ticks(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (Linux), or None when unknown / no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: fields after the last ')' are positional.
    rest = stat.rsplit(")", 1)[-1].split()
    return rest[19] if len(rest) > 19 else None


def owner_labels(run_id: str, task_id: str) -> dict[str, str]:
    """Labels for a container owned by this process."""
    pid = os.getpid()
    return {
        LABEL_RUN: run_id,
        LABEL_TASK: task_id,
        LABEL_OWNER_PID: str(pid),
        LABEL_HOST: socket.gethostname(),
        LABEL_OWNER_START: process_start_ticks(pid) or "",
    }


def owner_is_dead(labels: dict[str, str]) -> bool:
    """True only when the owner provably is gone: it ran on this host and its pid is dead (or was recycled).
    Containers of other hosts are never judged dead from here."""
    if labels.get(LABEL_HOST) != socket.gethostname():
        return False
    try:
        pid = int(labels.get(LABEL_OWNER_PID, ""))
    except ValueError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by another user
        return False
    recorded = labels.get(LABEL_OWNER_START)
    current = process_start_ticks(pid)
    return bool(recorded and current and recorded != current)


@dataclass
class ReapResult:
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # container name -> reason
    kept: int = 0  # labelled containers whose owner is alive (or on another host)


def reap(client: docker.DockerClient, run_id: str | None = None, dead_owners: bool | None = None,
         owner_pid: int | None = None, dry_run: bool = False) -> ReapResult:
    """Remove graph-planner containers: those of ``run_id``; those that process ``owner_pid`` of this host
    started (within ``run_id`` when both are given); and, with ``dead_owners`` (the default when neither is
    given), those whose owner process on this host is dead."""
    import docker.errors

    if dead_owners is None:
        dead_owners = run_id is None and owner_pid is None
    host = socket.gethostname()
    result = ReapResult()
    for container in client.containers.list(all=True, filters={"label": LABEL_RUN}):
        labels = container.labels or {}
        mine = owner_pid is not None and labels.get(LABEL_OWNER_PID) == str(owner_pid) and \
            labels.get(LABEL_HOST) == host
        of_run = run_id is not None and labels.get(LABEL_RUN) == run_id and (owner_pid is None or mine)
        if not (of_run or (run_id is None and mine) or (dead_owners and owner_is_dead(labels))):
            result.kept += 1
            continue
        if dry_run:
            result.removed.append(container.name)
            continue
        try:
            container.remove(force=True)
            result.removed.append(container.name)
        except docker.errors.NotFound:
            continue  # removed meanwhile (its owner closed it, or another reaper)
        except docker.errors.APIError as exc:
            result.failed[container.name] = str(exc)
            log.warning("reaper: could not remove container %s (run %s): %s", container.name,
                        labels.get(LABEL_RUN), exc)
    return result


@dataclass
class _ExitHooks:
    """What this process registered: one atexit hook and one SIGTERM handler, whatever the number of runs."""

    client_factory: Callable[[], Any]
    run_ids: set[str] = field(default_factory=set)
    sigterm_installed: bool = False


_hooks: _ExitHooks | None = None
_hooks_lock = threading.Lock()


def _reap_own(client_factory: Callable[[], Any]) -> None:
    """Remove the containers this very process started (a forked child or a sibling keeps its own)."""
    import docker.errors
    import requests

    runs = ", ".join(sorted(_hooks.run_ids)) if _hooks else "?"
    try:
        removed = reap(client_factory(), owner_pid=os.getpid()).removed
        if removed:
            log.info("reaper: removed %d container(s) of run(s) %s: %s", len(removed), runs, ", ".join(removed))
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        # at exit the engine may be gone: say so, never mask the exit
        log.warning("reaper: could not remove the containers of run(s) %s: %s (run `gp sandbox reap`)", runs, exc)


def install_signal_reaper(run_id: str, client_factory: Callable[[], Any] | None = None) -> bool:
    """Make this process remove the containers it started at interpreter exit and on SIGTERM (then the previous
    SIGTERM handler runs, or the default action). Installed once per process; later calls only record the run
    id. Returns False while the SIGTERM handler could not be installed (only the main thread may); the exit
    hook is installed regardless."""
    global _hooks
    import docker

    with _hooks_lock:
        if _hooks is None:
            _hooks = _ExitHooks(client_factory or docker.from_env)
            atexit.register(_reap_own, _hooks.client_factory)
        hooks = _hooks
        hooks.run_ids.add(run_id)
        if hooks.sigterm_installed:
            return True
        if threading.current_thread() is not threading.main_thread():
            log.debug("reaper: not the main thread, SIGTERM handler for run %s not installed yet", run_id)
            return False
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            _reap_own(hooks.client_factory)
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_sigterm)
        hooks.sigterm_installed = True
        return True
