"""Who owns a sandbox: the run, task, host, pid and pid start time recorded on every docker container (labels)
and local temp copy (`.owner`), so copies of runs that are gone can be told from live ones."""

from __future__ import annotations

import os
import socket

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
