"""CappedOutput keeps the exact head and tail of a stream with one note for the dropped middle; pump reads a pipe
into it and closes the pipe; the stand-alone source (synth's fork server) behaves the same."""

from __future__ import annotations

import gc
import os
import sys
import warnings

import pytest

from graph_planner.grading.graded_command import HEAD_BYTES, TAIL_BYTES
from graph_planner.sandbox.output_cap import (
    GRADED_REPLY_ROOM,
    CappedOutput,
    command_output,
    pump,
    standalone_source,
    start_pump,
)


def test_a_short_stream_is_kept_whole_without_a_note():
    cap = CappedOutput(4, 6)
    for piece in (b"ab", b"cdef", b"ghij"):
        cap.write(piece)
    assert cap.getvalue() == b"abcdefghij" and cap.dropped == 0 and cap.total == 10


@pytest.mark.parametrize("pieces", [[b"abcdefghijklmnopqrstuvwxyz"], [bytes([c]) for c in b"abcdefghijklmnopqrstuvwxyz"],
                                    [b"abc", b"defghijklmnopq", b"", b"rstuvw", b"xyz"]])
def test_head_and_tail_are_exact_with_one_note_for_the_middle(pieces):
    cap = CappedOutput(4, 6)
    for piece in pieces:
        cap.write(piece)
    assert cap.dropped == 16 and cap.total == 26
    assert cap.getvalue() == b"abcd\n[... 16 bytes of output dropped ...]\nuvwxyz"


def test_the_tail_stays_exact_across_many_trims_and_bytes_like_input():
    cap = CappedOutput(3, 5)
    data = bytes(range(256)) * 40
    for i in range(0, len(data), 7):
        cap.write(memoryview(data[i:i + 7]) if i % 2 else bytearray(data[i:i + 7]))
    dropped = len(data) - 8
    assert cap.getvalue() == data[:3] + f"\n[... {dropped} bytes of output dropped ...]\n".encode() + data[-5:]


def test_zero_tail_and_unbounded_head():
    cap = CappedOutput(2, 0)
    cap.write(b"abcdef")
    assert cap.getvalue() == b"ab\n[... 4 bytes of output dropped ...]\n"
    whole = CappedOutput(sys.maxsize, 0)
    whole.write(b"x" * 100_000)
    assert whole.getvalue() == b"x" * 100_000


def test_defaults_are_the_graded_runs_sizes():
    cap = CappedOutput()
    assert (cap.head_bytes, cap.tail_bytes) == (HEAD_BYTES, TAIL_BYTES)
    command = command_output()
    assert (command.head_bytes, command.tail_bytes) == (HEAD_BYTES, TAIL_BYTES + GRADED_REPLY_ROOM)


def test_pump_reads_a_pipe_to_its_end_and_closes_it(monkeypatch):
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    r, w = os.pipe()
    reader = os.fdopen(r, "rb")
    cap = CappedOutput(5, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        thread = start_pump(reader, cap)
        for _ in range(100):
            os.write(w, b"0123456789")
        os.close(w)
        thread.join(10)
        del reader
        gc.collect()
    assert not thread.is_alive() and cap.getvalue() == b"01234\n[... 990 bytes of output dropped ...]\n56789"
    assert not unraisable, unraisable


def test_pump_closes_the_pipe_of_an_empty_stream():
    r, w = os.pipe()
    os.close(w)
    reader = os.fdopen(r, "rb")
    pump(reader, CappedOutput(1, 1))
    assert reader.closed


def test_the_standalone_source_runs_without_graph_planner():
    namespace: dict[str, object] = {"__name__": "server"}
    exec(compile(standalone_source(), "<server>", "exec"), namespace)  # noqa: S102 - our own source
    cap = namespace["CappedOutput"](4, 6)
    cap.write(b"abcdefghijklmnopqrstuvwxyz")
    assert cap.getvalue() == b"abcd\n[... 16 bytes of output dropped ...]\nuvwxyz"
    assert {"pump", "start_pump"} <= namespace.keys() and "graph_planner" not in standalone_source()


def test_was_cut_sees_the_dropped_line_of_a_cap_and_nothing_else():
    from graph_planner.sandbox.output_cap import CappedOutput, was_cut

    cap = CappedOutput(4, 4)
    cap.write(b"0123456789abcdef")
    assert was_cut(cap.getvalue().decode())
    whole = CappedOutput(4, 40)
    whole.write(b"0123456789abcdef")
    assert not was_cut(whole.getvalue().decode())
    assert not was_cut("[... bytes of output dropped ...]\n")  # no count, no leading line end: not the cap's line
