"""Retry settings for I/O steps (download, prepull, Ray job submission): exponential backoff with jitter, and a
condition that retries only transient failures (network, timeouts, HTTP 5xx/429) — a missing file, a bad
config or a failed training job fails at once instead of being retried three times."""

from __future__ import annotations

import errno
import socket
from typing import Any

from prefect.tasks import exponential_backoff

#: Attempts after the first one, for every I/O step.
IO_RETRIES = 3
#: Seconds before retry k: 1, 2, 4 (x jitter).
IO_RETRY_DELAYS = exponential_backoff(backoff_factor=1)
#: Each delay is stretched by up to +50% at random, so parallel steps do not retry in lockstep.
IO_RETRY_JITTER = 0.5

_TRANSIENT_ERRNOS = {errno.ECONNRESET, errno.ECONNREFUSED, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EHOSTUNREACH,
                     errno.ENETUNREACH, errno.ENETDOWN, errno.EPIPE, errno.EAGAIN}


def _http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _is_transient_one(exc: BaseException) -> bool:
    import httpx
    import requests

    if isinstance(exc, (TimeoutError, ConnectionError, socket.gaierror, httpx.TransportError,
                        requests.ConnectionError, requests.Timeout)):
        return True
    status = _http_status(exc)
    if status is not None:
        return status >= 500 or status in (408, 429)
    return isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` or an exception it was raised from is a network/timeout/5xx failure worth retrying."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _is_transient_one(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def transient_only(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry only when the failure is transient (see :func:`is_transient`)."""
    try:
        state.result()
    except Exception as exc:  # noqa: BLE001 - the state's exception, re-raised by result()
        return is_transient(exc)
    return True
