"""A cap on sandboxes open at once on one node (``parallel.workflow_parallel``), shared by every process of a run
on that node and taken by every runner: :func:`graph_planner.env.assembly.build_env` gives each sandbox it makes
the run's slots, and the sandbox holds one from ``start()`` to ``close()``.

verl runs each AgentLoopWorker as its own Ray actor process, so an in-process semaphore would cap one worker, not
the node. A slot is one of ``size`` lock files in a node-local directory named after the run directory, held with
``flock``: processes coordinate through the kernel, and a worker that dies (OOM, SIGKILL) frees its slots with
its file descriptors. Waiting polls with back-off and holds nothing, so cancelling a waiting episode cannot
leak a slot.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import random
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
DEFAULT_ROOT = Path(tempfile.gettempdir()) / "graph_planner-sandbox-slots"


class SandboxSlot:
    """One held slot; ``release`` is idempotent and may be called from any thread."""

    def __init__(self, index: int, fd: int) -> None:
        self.index = index
        self._fd: int | None = fd
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


class SandboxSlots:
    """``size`` slots in ``directory`` plus the threads their holders run blocking sandbox calls on (one call at
    a time per holder, so ``size`` threads never queue behind another run's sandboxes or verl's tokenizer work)."""

    _pools: ClassVar[dict[tuple[str, int], SandboxSlots]] = {}
    _pools_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, directory: str | Path, size: int, poll_s: float = 0.05, max_poll_s: float = 0.5) -> None:
        if size < 1:
            raise ValueError(f"sandbox slots in {directory}: size must be >= 1, got {size}")
        self.directory = Path(directory)
        self.size = size
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self.directory.mkdir(parents=True, exist_ok=True)
        self.executor = ThreadPoolExecutor(max_workers=size + 2, thread_name_prefix="gp-sandbox")

    @classmethod
    def for_run(cls, run_dir: str | Path, size: int, root: str | Path | None = None) -> SandboxSlots:
        """The process-wide pool of the run in ``run_dir`` (every episode of the process shares it; other
        processes of the run on this node share its lock files: they name the same absolute run directory)."""
        run_dir = Path(run_dir).resolve()
        digest = hashlib.sha256(str(run_dir).encode()).hexdigest()[:12]
        directory = Path(root or DEFAULT_ROOT) / f"{_UNSAFE.sub('_', run_dir.name) or 'run'}-{digest}"
        key = (str(directory), size)
        with cls._pools_lock:
            pool = cls._pools.get(key)
            if pool is None:
                pool = cls._pools[key] = cls(directory, size)
        return pool

    def _slot_path(self, index: int) -> Path:
        return self.directory / f"slot-{index}.lock"

    def try_acquire(self) -> SandboxSlot | None:
        """A free slot, or None when all ``size`` are held (by any process)."""
        first = random.randrange(self.size)  # spread contending processes over the files
        for k in range(self.size):
            index = (first + k) % self.size
            fd = os.open(self._slot_path(index), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            return SandboxSlot(index, fd)
        return None

    def _pauses(self) -> Iterator[float]:
        """Seconds between tries: doubling from ``poll_s`` up to ``max_poll_s``, jittered so waiting processes
        do not retry in lockstep."""
        delay = self.poll_s
        while True:
            yield delay * (0.5 + random.random())
            delay = min(delay * 2, self.max_poll_s)

    async def acquire(self) -> SandboxSlot:
        """Wait (without blocking the event loop) until a slot is free, and take it."""
        for pause in self._pauses():
            slot = self.try_acquire()
            if slot is not None:
                return slot
            await asyncio.sleep(pause)
        raise AssertionError("unreachable")  # _pauses never ends

    def acquire_blocking(self) -> SandboxSlot:
        """Wait in this thread until a slot is free, and take it (the sandbox's own ``start()``)."""
        for pause in self._pauses():
            slot = self.try_acquire()
            if slot is not None:
                return slot
            time.sleep(pause)
        raise AssertionError("unreachable")  # _pauses never ends

    def held_count(self) -> int:
        """Slots held right now by any process (a probe: for tests and metrics, not for decisions)."""
        held = 0
        for index in range(self.size):
            fd = os.open(self._slot_path(index), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except BlockingIOError:
                held += 1
            finally:
                os.close(fd)
        return held
