"""Faults a run must survive honestly: SIGTERM with sandboxes in worker threads leaves no container and no temp
copy, `gp sandbox reap` removes copies of SIGKILLed runs, a lost engine is a sandbox_error with its cause and
`gp eval` exits non-zero, a second run on the same run dir is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from lock_holder import lock_held_elsewhere
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.env.samples import LOCAL_DEBUG_CONFIG
from graph_planner.eval.results import ResultsStore

ROOT = Path(__file__).resolve().parents[1]

# Sandboxes started from worker threads (as gp eval does), the exit cleanup installed from the main thread first
# (as the `gp` entry point does); then the process waits to be signalled.
HOLDER = textwrap.dedent("""
    import sys, time
    from concurrent.futures import ThreadPoolExecutor
    sys.path.insert(0, {tests!r})
    from graph_planner.sandbox.reaper import install_exit_cleanup
    install_exit_cleanup()
    from graph_planner.env.samples import load_sample_tasks
    from graph_planner.config.schema import RunConfig
    from graph_planner.sandbox.factory import make_sandbox
    backend = {backend!r}
    if backend == "docker":
        from docker_fixtures import docker_config, tiny_task
        tasks, config, where = [tiny_task(task_id=f"held-{{i}}") for i in range(3)], docker_config(), {dataset!r}
    else:
        tasks, config, where = load_sample_tasks()[:3], RunConfig(), None
    def start(task):
        box = make_sandbox(task, config, where, run_id={run!r}, backend=backend)
        box.start()
        return box
    with ThreadPoolExecutor(3) as pool:
        boxes = list(pool.map(start, tasks))
    print("ready", flush=True)
    time.sleep(600)
""")


def start_holder(tmp: Path, run_id: str, backend: str, dataset: Path | None = None) -> subprocess.Popen[str]:
    code = HOLDER.format(tests=str(Path(__file__).parent), run=run_id, backend=backend, dataset=str(dataset))
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        pytest.fail(f"holder did not start its sandboxes: {proc.stderr.read()[-2000:]}")
    return proc


def copies(tmp: Path) -> list[Path]:
    """The holder's 3 sandbox copies, plus the committed template they were copied from (one per process)."""
    return sorted(tmp.glob("gp-*"))


def test_sigterm_with_sandboxes_in_worker_threads_leaves_no_local_copy(tmp_path):
    proc = start_holder(tmp_path, f"term-{uuid.uuid4().hex[:6]}", "local")
    assert len(copies(tmp_path)) == 4
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM
    assert copies(tmp_path) == []


def test_gp_sandbox_reap_removes_local_copies_of_a_sigkilled_run(tmp_path):
    proc = start_holder(tmp_path, f"kill-{uuid.uuid4().hex[:6]}", "local")
    live = start_holder(tmp_path, f"live-{uuid.uuid4().hex[:6]}", "local")
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert len(copies(tmp_path)) == 8, "SIGKILL gives the run no chance to clean up"
        env = {**os.environ, "TMPDIR": str(tmp_path), "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
        reap = subprocess.run([sys.executable, "-m", "graph_planner.cli", "sandbox", "reap"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert reap.returncode == 0, reap.stderr[-2000:]
        assert "removed 4 local sandbox copy(ies); kept 4 of live runs" in " ".join(reap.stderr.split())
        assert len(copies(tmp_path)) == 4  # the live run's copies (and template) are kept
    finally:
        live.kill()
        live.wait()


@pytest.mark.docker
def test_sigterm_with_docker_sandboxes_in_worker_threads_leaves_no_container(tmp_path):
    import docker
    from docker_fixtures import TINY_IMAGE, write_tiny_repo

    from graph_planner.sandbox.images import build_sample_images
    from graph_planner.sandbox.reaper import LABEL_RUN

    client = docker.from_env()
    write_tiny_repo(tmp_path / "repos" / "calc")
    from docker_fixtures import tiny_task

    [built] = build_sample_images([tiny_task(image=TINY_IMAGE)], tmp_path, client=client)
    assert built.status in ("built", "cached"), built.reason
    run_id = f"dterm-{uuid.uuid4().hex[:6]}"
    proc = start_holder(tmp_path, run_id, "docker", tmp_path)
    assert len(client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})) == 3
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == -signal.SIGTERM
    assert client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"}) == []


@pytest.fixture(scope="module")
def prepared(bundled_samples) -> Path:
    return bundled_samples / "swebench" / "test.jsonl"


def _eval_args(tmp_path: Path, prepared: Path, *extra: str) -> list[str]:
    return ["eval", "-c", str(LOCAL_DEBUG_CONFIG), "--dataset", str(prepared), "--limit", "2", "--run-name", "faults",
            "--output-dir", str(tmp_path), "--set", "backends.planner_backend=rule",
            "--set", "backends.cgm_backend=gold", "--set", f"paths.cache_dir={tmp_path / 'cache'}", *extra]


def test_lost_engine_is_a_sandbox_error_with_its_cause_and_gp_eval_exits_3(tmp_path, prepared, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/dockerd-gone.sock")
    result = CliRunner().invoke(app, _eval_args(tmp_path, prepared, "--sandbox", "docker"))
    assert result.exit_code == 3, result.output
    rows = ResultsStore(tmp_path / "faults" / "eval" / "results.jsonl").load("policy")
    assert len(rows) == 2 and all(r.status == "error" and r.category == "sandbox_error" for r in rows)
    assert all("no Docker engine answers" in (r.error or "") for r in rows)
    assert ResultsStore(tmp_path / "faults" / "eval" / "results.jsonl").finished_ids() == set()  # retried on resume
    report = json.loads((tmp_path / "faults" / "eval" / "report.json").read_text())
    assert report["labels"]["policy"]["errors"] == 2


def test_a_second_run_on_the_same_run_dir_is_refused(tmp_path, prepared):
    run_dir = tmp_path / "faults" / "eval"
    with lock_held_elsewhere(run_dir) as holder:
        result = CliRunner().invoke(app, _eval_args(tmp_path, prepared))
    assert result.exit_code == 4
    # rich wraps at 80 columns, at a space or (a long tmp path, as under pytest-xdist) mid-word: the message is
    # compared with all whitespace taken out of both sides
    assert "".join(f"run directory {run_dir} is in use by pid {holder}".split()) in "".join(result.output.split())
    assert not (run_dir / "results.jsonl").exists()
    started = time.monotonic()
    assert CliRunner().invoke(app, _eval_args(tmp_path, prepared)).exit_code == 0  # released: runs normally
    assert time.monotonic() - started < 300
