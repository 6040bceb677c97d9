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

from graph_planner import termination
from graph_planner.sandbox.local_copies import kill_own_commands, remove_own_copies
from graph_planner.sandbox.owner import (  # noqa: F401 - re-exported: the labels are the reaper's vocabulary
    LABEL_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_RUN,
    LABEL_TASK,
    owner_is_dead,
    owner_labels,
    process_start_ticks,
)

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

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
    """What this process registered: one atexit hook and one SIGTERM handler, whatever the number of runs and
    threads. The handler removes this process's containers (once a docker sandbox registered a client factory)
    and its local temp copies."""

    client_factory: Callable[[], Any] | None = None
    run_ids: set[str] = field(default_factory=set)
    sigterm_installed: bool = False


_hooks = _ExitHooks()
_hooks_lock = threading.Lock()
_atexit_registered = False


def _reap_own(client_factory: Callable[[], Any] | None) -> None:
    """Remove the containers and local copies this very process started (a forked child keeps its own), and stop
    the commands still running in its local sandboxes."""
    kill_own_commands()
    copies = remove_own_copies()
    if copies:
        log.info("reaper: removed %d local sandbox copy(ies)", len(copies))
    if client_factory is None:
        return
    import docker.errors
    import requests

    runs = ", ".join(sorted(_hooks.run_ids)) or "?"
    try:
        removed = reap(client_factory(), owner_pid=os.getpid()).removed
        if removed:
            log.info("reaper: removed %d container(s) of run(s) %s: %s", len(removed), runs, ", ".join(removed))
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        # at exit the engine may be gone: say so, never mask the exit
        log.warning("reaper: could not remove the containers of run(s) %s: %s (run `gp sandbox reap`)", runs, exc)


def _on_exit() -> None:
    _reap_own(_hooks.client_factory)


def install_exit_cleanup() -> bool:
    """Make this process remove its sandboxes at interpreter exit and on SIGTERM. Idempotent.

    Under the `gp` command (graph_planner.termination installed) the cleanup is registered there: it runs after
    the main thread unwound, never inside the signal handler. Elsewhere (a Prefect flow, a library caller) a SIGTERM
    handler removes them (taking no lock: a copy in flight may hold one, in this very thread) and then the previous
    handler runs, or the default action. A handler can only be installed from the main thread: entry points (`gp
    ...`, evaluate_dataset, the Prefect flows) call this first, so sandboxes started later in worker threads are
    covered. Returns whether SIGTERM is covered."""
    global _atexit_registered
    with _hooks_lock:
        if not _atexit_registered:
            atexit.register(_on_exit)
            _atexit_registered = True
        if _hooks.sigterm_installed:
            return True
        if termination.installed():
            termination.register_cleanup(_on_exit)
            _hooks.sigterm_installed = True
            return True
        if threading.current_thread() is not threading.main_thread():
            log.debug("reaper: not the main thread, SIGTERM handler not installed yet")
            return False
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            _reap_own(_hooks.client_factory)
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_sigterm)
        _hooks.sigterm_installed = True
        return True


def install_signal_reaper(run_id: str, client_factory: Callable[[], Any] | None = None) -> bool:
    """Docker sandboxes: remember the run and how to reach the engine, then install_exit_cleanup()."""
    import docker

    with _hooks_lock:
        if _hooks.client_factory is None:
            _hooks.client_factory = client_factory or docker.from_env
        _hooks.run_ids.add(run_id)
    return install_exit_cleanup()
