"""The pieces of graph_planner.termination that need no subprocess: exit codes, the exit cleanup never waiting on the
sandbox-copy lock (the old SIGTERM deadlock), and worker pools left without waiting after a signal.
The end-to-end signals are in tests/test_signals.py."""

from __future__ import annotations

import shutil
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


def test_a_template_copy_in_flight_in_a_worker_is_gone_when_the_exit_cleanup_returns(tmp_path, monkeypatch):
    """Stop 32's CI: `gp grade` SIGTERMed while a worker thread was still copying a task's tree into a new
    template; the cleanup removed the template's dir, copytree recreated what it needed and went on, and the
    process exited with the copy still on disk. Now the copy stops at its next file and the cleanup waits (bounded)
    for it, then removes what came back."""
    source = tmp_path / "src"
    for d in range(40):
        (source / f"pkg{d}").mkdir(parents=True)
        for f in range(100):
            (source / f"pkg{d}" / f"m{f}.py").write_text("x = 1\n" * 50)
    monkeypatch.setattr(local_copies.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    copying, errors, copy2 = threading.Event(), [], shutil.copy2

    def slow_copy2(src, dst, **kwargs):  # the copy is under way: the signal lands in the middle of it
        copying.set()
        time.sleep(0.002)
        return copy2(src, dst, **kwargs)

    monkeypatch.setattr(local_copies.shutil, "copy2", slow_copy2)

    def build_template() -> None:
        try:
            local_copies.copy_from_template(source, "c0ffee", tmp_path / "dest", "run", "task", lambda repo: "c0ffee")
        except BaseException as exc:  # noqa: BLE001 - the worker's error is the expected stop
            errors.append(exc)

    worker = threading.Thread(target=build_template)
    worker.start()
    try:
        assert copying.wait(30)
        monkeypatch.setattr(termination._state, "signum", signal.SIGTERM)
        start = time.monotonic()
        local_copies.remove_own_copies(lock_wait_s=2.0)
        assert time.monotonic() - start < 5.0
        left = [p.name for p in (tmp_path / "tmp").iterdir()]
        assert left == [], f"copies left after the exit cleanup: {left}"
    finally:
        worker.join(60)
    assert errors and "terminating" in str(errors[0])
