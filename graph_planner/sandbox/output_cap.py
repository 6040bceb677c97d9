"""Bounded capture of a command's output: the first ``HEAD_BYTES`` and the last ``TAIL_BYTES`` of a stream, with one
note line where the middle was dropped. A command printing in a loop (an RL rollout's runaway test) must not take
the host's memory (local and docker sandboxes) or disk (synth's fork server log); the head shows how it started,
the tail how it ended (pytest's summary). The sizes are the graded run's (grading/graded_command.py).

``CappedOutput`` and ``pump`` use only ``os`` and ``threading``: synth's fork server runs their source in the
sandbox's own Python (synth/runner.py), where graph_planner may not be importable.
"""

from __future__ import annotations

import os
import re
import threading
from typing import BinaryIO

from graph_planner.grading.graded_command import HEAD_BYTES, TAIL_BYTES

#: Room a sandbox command's tail keeps past ``TAIL_BYTES``: a graded run (graded_command.py) replies with up to
#: HEAD_BYTES + TAIL_BYTES of test output plus its section lines, skipped modules and the recorder's record (about
#: 120 bytes a test), and that reply must come back whole, never cut a second time here.
GRADED_REPLY_ROOM = 4 * 1024 * 1024


class CappedOutput:
    """The head and tail of a byte stream and how much was written. Thread-safe: a reader thread writes while the
    owner may take a value (a command past its timeout)."""

    def __init__(self, head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES) -> None:
        self.head_bytes = head_bytes
        self.tail_bytes = tail_bytes
        self.total = 0  # bytes written
        self._head = bytearray()
        self._tail = bytearray()  # up to 2 * tail_bytes between trims: each byte is moved at most once on average
        self._lock = threading.Lock()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data).cast("B")
        with self._lock:
            self.total += len(view)
            room = self.head_bytes - len(self._head)
            if room > 0:
                self._head += view[:room]
                view = view[room:]
            if len(view) >= self.tail_bytes:
                self._tail[:] = view[len(view) - self.tail_bytes:]
            elif len(view):
                self._tail += view
                if len(self._tail) > 2 * self.tail_bytes:
                    del self._tail[:len(self._tail) - self.tail_bytes]
        return len(data)

    @property
    def dropped(self) -> int:
        """Bytes cut out of the middle."""
        return max(0, self.total - self.head_bytes - self.tail_bytes)

    def getvalue(self) -> bytes:
        """Head, then (when something was dropped) ``\\n[... N bytes of output dropped ...]\\n``, then tail."""
        with self._lock:
            tail = self._tail[max(0, len(self._tail) - self.tail_bytes):]
            dropped = self.dropped
            note = f"\n[... {dropped} bytes of output dropped ...]\n".encode() if dropped else b""
            return bytes(self._head) + note + bytes(tail)


def pump(pipe: BinaryIO, sink: CappedOutput, chunk: int = 1 << 16) -> None:
    """Read ``pipe`` to its end into ``sink``, then close it (as ``communicate()`` does); one thread per pipe."""
    try:
        fd = pipe.fileno()
        while True:
            try:
                data = os.read(fd, chunk)
            except OSError:
                break
            if not data:
                break
            sink.write(data)
    finally:
        pipe.close()


def start_pump(pipe: BinaryIO, sink: CappedOutput) -> threading.Thread:
    """``pump`` in a daemon thread (started): it ends when every writer of the pipe has closed it."""
    thread = threading.Thread(target=pump, args=(pipe, sink), name="output-pump", daemon=True)
    thread.start()
    return thread


#: The line ``CappedOutput.getvalue`` puts where it dropped the middle.
_DROPPED_LINE = re.compile(r"\n\[\.\.\. \d+ bytes of output dropped \.\.\.\]\n")


def was_cut(text: str) -> bool:
    """Whether ``text`` (a command's decoded output) had its middle dropped by a cap. A graded run's reply that
    was cut is never graded (sandbox/checked_run.py): the cut may have taken log lines or record entries, and a
    command that prints this line itself only fails its own grading."""
    return _DROPPED_LINE.search(text) is not None


def command_output() -> CappedOutput:
    """The cap of one sandbox command's stdout or stderr: HEAD_BYTES, then TAIL_BYTES plus room for a graded
    run's reply (GRADED_REPLY_ROOM)."""
    return CappedOutput(HEAD_BYTES, TAIL_BYTES + GRADED_REPLY_ROOM)


def standalone_source() -> str:
    """``CappedOutput``, ``pump`` and ``start_pump`` as the head of a stand-alone script, for a Python that cannot
    import graph_planner (synth's fork server runs in the sandbox's own Python)."""
    import inspect

    return "".join(["from __future__ import annotations\nimport os, threading\n",
                    f"HEAD_BYTES, TAIL_BYTES = {HEAD_BYTES}, {TAIL_BYTES}\n",
                    *(inspect.getsource(obj) + "\n" for obj in (CappedOutput, pump, start_pump))])
