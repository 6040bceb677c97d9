"""`gp serve`'s app on a loopback port in a thread, for tests that talk HTTP to it (the official openai client,
rLLM's OpenAI engine)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def serving(app: Any, start_timeout_s: float = 30.0) -> Iterator[str]:
    """Run ``app`` with uvicorn on a free loopback port; yields its base URL (no /v1)."""
    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        assert time.monotonic() < deadline, f"gp serve app did not start within {start_timeout_s:.0f} s"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
