"""The pieces of graph_planner.termination that need no subprocess: exit codes, the exit cleanup never waiting on the
sandbox-copy lock (the old SIGTERM deadlock), and worker pools left without waiting after a signal.
The end-to-end signals are in tests/test_signals.py."""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from graph_planner import termination
from graph_planner.sandbox import local_copies


def test_exit_codes_follow_the_shell_convention():
    assert termination.exit_code_for(signal.SIGTERM) == 143
    assert termination.exit_code_for(signal.SIGINT) == 130
    assert termination.Terminated(signal.SIGTERM).exit_code == 143
    assert not issubclass(termination.Terminated, Exception)  # `except Exception` must not swallow it


def test_removing_own_copies_does_not_wait_for_the_copy_lock_this_thread_holds(tmp_path):
    """The deadlock of issue 27: the handler ran in the thread that held the template lock mid-copy."""
    root = tmp_path / "gp-held"
    (root / "repo").mkdir(parents=True)
    local_copies.track_copy(root)
    with local_copies._template_lock:
        start = time.monotonic()
        removed = local_copies.remove_own_copies(lock_wait_s=0.2)
        took = time.monotonic() - start
    assert root in removed and not root.exists()
    assert took < 5.0


def test_removing_own_copies_does_not_wait_for_a_worker_holding_the_copy_lock(tmp_path):
    root = tmp_path / "gp-worker"
    root.mkdir()
    local_copies.track_copy(root)
    held, release = threading.Event(), threading.Event()

    def copy_in_flight() -> None:
        with local_copies._template_lock:
            held.set()
            release.wait(30)

    worker = threading.Thread(target=copy_in_flight)
    worker.start()
    try:
        assert held.wait(10)
        start = time.monotonic()
        local_copies.remove_own_copies(lock_wait_s=0.2)
        assert time.monotonic() - start < 5.0 and not root.exists()
    finally:
        release.set()
        worker.join()


def test_a_signal_leaves_a_worker_pool_without_waiting_for_the_episodes_in_flight():
    release = threading.Event()
    start = time.monotonic()
    with pytest.raises(termination.Terminated):
        with termination.leave_pool(ThreadPoolExecutor(2)) as pool:
            pool.submit(release.wait, 30)
            raise termination.Terminated(signal.SIGTERM)
    assert time.monotonic() - start < 5.0
    release.set()


def test_an_ordinary_error_still_waits_for_the_work_in_flight():
    done = []
    with pytest.raises(ValueError):
        with termination.leave_pool(ThreadPoolExecutor(1)) as pool:
            pool.submit(lambda: (time.sleep(0.3), done.append(1)))
            raise ValueError("boom")
    assert done == [1]
