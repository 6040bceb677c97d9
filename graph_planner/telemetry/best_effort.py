"""Telemetry that can never fail or stall a run: Prefect progress artifacts, W&B, tensorboard and heartbeats are
sent from one background thread per sender, with a bounded queue, so the training/eval loop neither waits on a
server nor sees its errors.

A failed call is counted and logged once per outage ("... failed (ConnectError: ...); the run goes on"), the first
success after it logs "... reachable again", a queue that fills up drops its oldest call with one "falling behind"
warning, and :meth:`BestEffort.close` waits a bounded time for what is queued and logs a summary such as
``prefect artifacts: 2 sent, 2 failed (ConnectError)``. Calls with the same ``key`` (a progress bar) replace each
other while queued: only the newest state is worth sending.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

#: Calls a sender may hold before it drops the oldest one.
MAX_PENDING = 256
#: Seconds :meth:`BestEffort.close` waits for queued calls before it gives up on them.
CLOSE_TIMEOUT_S = 10.0


@dataclass
class SendHealth:
    """Counts and logs the calls of one telemetry sink: a warning at the first failure of an outage, "reachable
    again" at the first success after it, and a summary line at the end."""

    name: str
    sent: int = 0
    failed: int = 0
    dropped: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    failing: int = 0  # failures since the last success

    def record_failure(self, exc: BaseException) -> None:
        self.failed += 1
        self.errors[type(exc).__name__] += 1
        self.failing += 1
        if self.failing == 1:
            log.warning("%s: send failed (%s: %s); the run goes on, later updates are still sent", self.name,
                        type(exc).__name__, str(exc)[:200])

    def record_success(self) -> None:
        self.sent += 1
        if self.failing:
            log.warning("%s: reachable again after %d failed call(s)", self.name, self.failing)
            self.failing = 0

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """``fn(*args, **kwargs)`` now, in this thread; an exception is recorded, never raised."""
        try:
            fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - telemetry must never fail the run
            self.record_failure(exc)
        else:
            self.record_success()

    def summary(self) -> str:
        kinds = ", ".join(kind if n == self.failed else f"{kind} x{n}" for kind, n in self.errors.most_common())
        text = f"{self.name}: {self.sent} sent, {self.failed} failed" + (f" ({kinds})" if kinds else "")
        return text + (f", {self.dropped} dropped" if self.dropped else "")

    def log_summary(self) -> None:
        """The summary as a warning when anything failed or was dropped (nothing to say otherwise)."""
        if self.failed or self.dropped:
            log.warning("%s", self.summary())


class BestEffort:
    """One background thread sending ``fn(*args)`` calls in order; errors are logged and counted, never raised."""

    def __init__(self, name: str, max_pending: int = MAX_PENDING) -> None:
        self.name = name
        self.max_pending = max_pending
        self.stats = SendHealth(name)
        self._pending: OrderedDict[Any, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = OrderedDict()
        self._cond = threading.Condition()
        self._ids = itertools.count()
        self._busy = False
        self._closed = False
        self._behind_warned = False
        self._thread = threading.Thread(target=self._run, name=f"best-effort-{name}", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, key: Any = None, **kwargs: Any) -> None:
        """Queue ``fn(*args, **kwargs)``; with ``key``, a queued call of the same key is replaced by this one.

        The call runs in a copy of the caller's context (a Prefect artifact still belongs to the caller's run)."""
        context = contextvars.copy_context()
        args = (fn, *args)
        fn = context.run
        with self._cond:
            if self._closed:
                self.stats.dropped += 1
                return
            slot = ("key", key) if key is not None else ("call", next(self._ids))
            self._pending.pop(slot, None)
            self._pending[slot] = (fn, args, kwargs)
            if len(self._pending) > self.max_pending:
                self._pending.popitem(last=False)
                self.stats.dropped += 1
                if not self._behind_warned:
                    self._behind_warned = True
                    log.warning("%s: falling behind (%d calls queued); dropping the oldest, the run goes on",
                                self.name, self.max_pending)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                _, (fn, args, kwargs) = self._pending.popitem(last=False)
                self._busy = True
            try:
                self.stats.call(fn, *args, **kwargs)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def flush(self, timeout: float = CLOSE_TIMEOUT_S) -> bool:
        """Wait (at most ``timeout`` s) until every queued call ran; False when some are still queued."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> SendHealth:
        """Send what is queued (bounded wait), stop the thread and log the summary when anything went wrong."""
        drained = self.flush(timeout)
        with self._cond:
            self._closed = True
            if not drained:
                self.stats.dropped += len(self._pending)
                self._pending.clear()
            self._cond.notify_all()
        self.stats.log_summary()
        return self.stats
