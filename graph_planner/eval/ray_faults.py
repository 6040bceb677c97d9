"""What a lost Ray node or a lost head means for an eval run on ``eval.executor=ray``.

A worker node that dies (SIGKILL, preemption, hardware) fails the episodes it was running with one of Ray's
system errors (:data:`NODE_LOSS_ERRORS`). Those episodes never produced a verdict, so they are played again on a
node still alive, up to :data:`NODE_LOSS_ATTEMPTS` attempts per task, and only then become an error row: a single
node loss costs time, not results.

Losing the head (its GCS) ends the run: nothing can be scheduled without it, and Ray's own client would retry the
GCS for 60 s, then end the process (exit 1, no report). The driver probes the GCS and its own raylet itself
(:class:`ClusterWatch`) and raises :class:`ClusterLost` once they stayed unreachable for
:data:`HEAD_LOSS_GRACE_S`; the runner then writes the report of what finished and ``gp eval`` exits 6 with one
line. A resume on the same run directory plays only what is missing.
"""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

#: Ray's errors for work lost with its process or node (not an exception of the episode itself).
NODE_LOSS_ERRORS = ("NodeDiedError", "WorkerCrashedError", "ActorDiedError", "ObjectLostError")
#: Attempts per task when its node is lost under it (1 + 2 retries), then an error row.
NODE_LOSS_ATTEMPTS = 3
#: How long the GCS (or the driver's raylet) may stay unreachable before the cluster counts as lost.
HEAD_LOSS_GRACE_S = 3.0
PROBE_TIMEOUT_S = 1.0


class ClusterLost(RuntimeError):
    """The Ray head (or the node this driver is attached to) is gone; episodes in flight were dropped."""

    def __init__(self, what: str, unfinished: int) -> None:
        self.what = what
        self.unfinished = unfinished
        self.report: Path | None = None  # the runner's report of what finished
        self.graded = 0
        self.total = 0
        super().__init__(f"lost {what}; {unfinished} task(s) were in flight or queued")

    def line(self, command: str = "gp eval") -> str:
        """What the user sees: what was lost, what is kept, how to finish."""
        kept = f"{self.graded}/{self.total} task(s) graded, report {self.report}" if self.report else "nothing written"
        return (f"{command}: lost {self.what} mid-run ({self.unfinished} task(s) in flight or queued dropped; "
                f"{kept}); bring the cluster back and run the same command again to finish the rest")


def node_loss_kind(exc: BaseException) -> str | None:
    """The name of the Ray system error when ``exc`` means the episode's node or worker was lost, else None."""
    try:
        import ray.exceptions as ray_errors
    except ImportError:  # pragma: no cover - only called with ray installed
        return None
    kinds = tuple(getattr(ray_errors, name) for name in NODE_LOSS_ERRORS if hasattr(ray_errors, name))
    return type(exc).__name__ if kinds and isinstance(exc, kinds) else None


def reachable(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """A TCP connect to ``host:port`` succeeds (the GCS and raylet ports refuse at once when their process died)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


@dataclass
class ClusterWatch:
    """Probes the cluster's head (GCS) and the raylet this driver talks to; both are needed to schedule work."""

    endpoints: dict[str, str]  # what -> host:port
    grace_s: float = HEAD_LOSS_GRACE_S
    down_since: float | None = field(default=None, init=False)
    lost: str | None = field(default=None, init=False)

    @classmethod
    def of_driver(cls) -> ClusterWatch:
        """The endpoints of the Ray this process is connected to (``ray.init`` done); none to probe (never lost)
        when the connection does not say them (a Ray Client ``ray://`` address)."""
        import ray

        context = ray.get_runtime_context()
        try:
            gcs, own = context.gcs_address, context.get_node_id()
        except Exception as exc:  # noqa: BLE001 - Ray Client contexts lack them: nothing to probe
            log.warning("Ray: cannot tell the head's address (%s); a lost head is not detected", exc)
            return cls({})
        endpoints = {f"the Ray head (GCS {gcs})": gcs}
        for node in ray.nodes():
            if node.get("NodeID") == own and node.get("NodeManagerAddress") and node.get("NodeManagerPort"):
                address = f"{node['NodeManagerAddress']}:{node['NodeManagerPort']}"
                endpoints[f"this driver's Ray node (raylet {address})"] = address
        return cls(endpoints)

    @property
    def healthy(self) -> bool:
        return self.down_since is None

    def check(self, unfinished: int, now: float | None = None) -> bool:
        """Probe every endpoint: True when all answer; raise ClusterLost once one stayed down past the grace."""
        now = time.monotonic() if now is None else now
        down = [what for what, address in self.endpoints.items() if not reachable(address)]
        if not down:
            if self.down_since is not None:
                log.warning("Ray cluster reachable again after %.1f s", now - self.down_since)
            self.down_since = None
            return True
        if self.down_since is None:
            self.down_since = now
            log.warning("Ray: %s unreachable; waiting up to %.0f s", " and ".join(down), self.grace_s)
        if now - self.down_since >= self.grace_s:
            self.lost = " and ".join(down)
            raise ClusterLost(self.lost, unfinished)
        return False


def exit_now(code: int) -> None:
    """End the process at once after a lost cluster: the run's files are written and its lock released by now, but
    Ray's exit hook would wait on the lost GCS (``ray.shutdown``), so the interpreter's exit hooks are skipped."""
    import os
    import sys

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
