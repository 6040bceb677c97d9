"""Losing the Docker engine in the middle of `gp eval`: the run reaches the engine through a socket proxy that is
cut after the first task finishes. The tasks that lost it are sandbox_error rows naming the cause, `gp eval`
exits 3, the containers it could not remove are reaped once the run is gone, and resuming with an engine retries
exactly the errored tasks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from docker_fixtures import base_image, docker_client, tiny_dataset, tiny_task  # noqa: F401 - pytest fixtures

from graph_planner.data.io import write_task_records
from graph_planner.env.samples import LOCAL_DEBUG_CONFIG
from graph_planner.eval.results import ResultsStore
from graph_planner.sandbox.reaper import LABEL_RUN, LABEL_TASK, reap

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.docker, pytest.mark.slow]


class EngineProxy:
    """A unix-socket proxy in front of the real engine's socket; cut() closes it and every open connection."""

    def __init__(self, path: Path, upstream: str) -> None:
        self.path, self.upstream = path, upstream
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(64)
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.upstream)
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        self.server.close()
        self.path.unlink(missing_ok=True)
        with self.lock:
            for conn in self.conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()


def test_engine_lost_mid_run_is_a_sandbox_error_exit_3_and_resume_retries(tmp_path, docker_client,  # noqa: F811
                                                                        tiny_dataset):  # noqa: F811
    real = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock").removeprefix("unix://")
    dataset = tiny_dataset / "loss.jsonl"
    write_task_records(dataset, [tiny_task(task_id=f"loss-{i}") for i in range(4)])
    proxy = EngineProxy(tmp_path / "engine.sock", real)
    run_name = f"loss-{os.getpid()}"
    args = [sys.executable, "-m", "graph_planner.cli", "eval", "-c", str(LOCAL_DEBUG_CONFIG), "--dataset",
            str(dataset), "--batch-size", "1", "--run-name", run_name, "--output-dir", str(tmp_path / "runs"),
            "--sandbox", "docker", "--set", "backends.planner_backend=rule", "--set", "backends.cgm_backend=gold",
            "--set", "sandbox.memory=512m", "--set", f"paths.cache_dir={tmp_path / 'cache'}"]
    results = tmp_path / "runs" / run_name / "eval" / "results.jsonl"
    env = {**os.environ, "DOCKER_HOST": f"unix://{proxy.path}"}
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not (results.exists() and results.read_text()):
        time.sleep(0.1)
    # cut while the second task's container is up: the engine disappears in the middle of an episode
    while time.monotonic() < deadline and proc.poll() is None and not docker_client.containers.list(
            filters={"label": f"{LABEL_TASK}=loss-1"}):
        time.sleep(0.05)
    proxy.cut()  # dockerd is gone, as far as the run can tell
    mid_episode = docker_client.containers.list(all=True, filters={"label": f"{LABEL_TASK}=loss-1"})
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, err[-3000:]
    rows = ResultsStore(results).load("policy")
    errored = [r for r in rows if r.status == "error"]
    assert len(rows) == 4 and errored, [r.status for r in rows]
    assert all(r.category == "sandbox_error" for r in errored), [(r.category, r.error) for r in errored]
    assert all(r.error for r in errored)
    assert "task(s) errored" in " ".join(err.split())

    assert next(r for r in rows if r.instance_id == "loss-1").status == "error"
    # the run could not remove what it started while the engine was unreachable; the reaper can, now it is gone
    assert mid_episode and docker_client.containers.list(all=True, filters={"label": f"{LABEL_TASK}=loss-1"})
    reap(docker_client, dead_owners=True)
    left = docker_client.containers.list(all=True, filters={"label": LABEL_RUN})
    assert not [c for c in left if (c.labels or {}).get(LABEL_RUN, "").startswith(f"eval-{run_name}")]

    again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    finished = [x["instance_id"] for x in lines if x["label"] == "policy" and x["status"] == "finished"]
    assert sorted(finished) == [f"loss-{i}" for i in range(4)]  # each errored task ran again, once
