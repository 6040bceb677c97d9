"""A real local Prefect server + process work pool + worker, started by scripts/prefect-local.sh: deploy
everything in deployments/prefect.yaml, trigger the nightly eval the way CI does (`prefect deployment run ...
--watch`: exit 0 on success, 1 on a failing run) and check that the cron schedule created SCHEDULED runs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def alert_posts() -> Iterator[tuple[str, list[dict]]]:
    """A recording webhook: the URL and the requests POSTed to it."""
    from prefect_fixtures import recording_webhook

    with recording_webhook() as hook:
        yield hook


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory,
                 alert_posts: tuple[str, list[dict]]) -> Iterator[tuple[Path, dict[str, str]]]:
    """A project dir (code and data linked from the repo, outputs private) with a server + worker running, and the
    failure alert of the nightly eval pointed at ``alert_posts``."""
    project = tmp_path_factory.mktemp("project")
    for name in ("configs", "datasets", "deployments", "flows", "tasks"):
        (project / name).symlink_to(ROOT / name)
    port = free_port()
    env = {**os.environ, "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5",
           "PREFECT_BIN": str(BIN), "HF_HUB_OFFLINE": "1"}
    script = ["bash", str(ROOT / "scripts" / "prefect-local.sh")]
    started = subprocess.run([*script, "start", "--port", str(port), "--alert-webhook", alert_posts[0]], check=False,
                             cwd=project, env=env, capture_output=True, text=True, timeout=300)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield project, env
    finally:
        subprocess.run([*script, "stop"], check=False, cwd=project, env=env, capture_output=True, timeout=60)


def deployment_run(env: dict[str, str], project: Path, *params: str) -> subprocess.CompletedProcess[str]:
    args = [str(BIN / "prefect"), "deployment", "run", "evaluate/nightly-eval", "--watch", "--watch-timeout", "300"]
    for param in params:
        args += ["--param", param]
    return subprocess.run(args, check=False, cwd=project, env=env, capture_output=True, text=True, timeout=330)


def test_the_worker_polls_every_two_seconds(local_server) -> None:
    """prefect-local.sh starts its worker with a 2 s poll (Prefect's default is 10 s): a triggered run starts at once."""
    project, _ = local_server
    pid = (project / ".cache" / "prefect-local" / "worker.pid").read_text().strip()
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"PREFECT_WORKER_QUERY_SECONDS=2" in environ


def test_ci_trigger_exits_zero_for_a_good_run_and_writes_the_report(local_server) -> None:
    project, env = local_server
    done = deployment_run(env, project, "limit=1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Completed" in done.stdout
    reports = list((project / "runs" / "local_debug-latest" / "evals").glob("*/eval/report.md"))
    assert len(reports) == 1 and "Evaluation report" in reports[0].read_text()


def test_ci_trigger_exits_one_for_a_failing_run_and_the_alert_is_posted(local_server, alert_posts) -> None:
    project, env = local_server
    done = deployment_run(env, project, "config_path=configs/experiments/does_not_exist.yaml")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Failed" in done.stdout + done.stderr
    _, received = alert_posts
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(post["body"]["state"] == "Failed" for post in received):
        time.sleep(1)
    failed = [post["body"] for post in received if post["body"]["state"] == "Failed"]
    assert failed, f"no alert for the failed nightly run (received: {received})"
    assert failed[-1]["deployment"] == "evaluate/nightly-eval" and "does_not_exist.yaml" in failed[-1]["message"]
    assert failed[-1]["url"].startswith("http://127.0.0.1:")  # the real server knows its UI URL


def _trigger(env: dict[str, str], project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "python"), "-m", "flows.trigger", *args], check=False, cwd=project,
                          env={**env, "PYTHONPATH": str(project)}, capture_output=True, text=True, timeout=330)


def _count_runs(env: dict[str, str], deployment: str) -> int:
    query = {"deployments": {"name": {"any_": [deployment]}}}
    return len(httpx.post(f"{env['PREFECT_API_URL']}/flow_runs/filter", json=query, timeout=10).json())


def test_trigger_refuses_a_misspelt_override_before_creating_a_run(local_server) -> None:
    project, env = local_server
    before = _count_runs(env, "nightly-eval")
    done = _trigger(env, project, "evaluate/nightly-eval", "--set", "eval.limt=1", "--watch")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no run created" in done.stderr and "did you mean eval.limit" in done.stderr
    assert _count_runs(env, "nightly-eval") == before


def test_trigger_watch_shows_why_a_run_failed_and_where_its_logs_are(local_server) -> None:
    project, env = local_server
    done = _trigger(env, project, "evaluate/nightly-eval", "--param", "dataset=missing/tasks.jsonl", "--param",
                    "limit=1", "--watch", "--timeout", "300")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "finished in state Failed" in done.stdout
    assert "UI: http://127.0.0.1:" in done.stdout and ": Running\n" in done.stdout  # the URL, then each state
    assert "missing/tasks.jsonl" in done.stderr  # the state's message names what was wrong
    assert "prefect flow-run logs " in done.stderr


def test_cron_schedule_creates_scheduled_runs(local_server) -> None:
    _, env = local_server
    query = {"deployments": {"name": {"any_": ["nightly-eval"]}},
             "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}}}
    deadline = time.monotonic() + 90
    runs: list[dict] = []
    while time.monotonic() < deadline and not runs:
        runs = httpx.post(f"{env['PREFECT_API_URL']}/flow_runs/filter", json=query, timeout=10).json()
        if not runs:
            time.sleep(2)
    assert runs, "the scheduler created no SCHEDULED runs for evaluate/nightly-eval"
    starts = sorted(run["expected_start_time"] for run in runs)
    assert all("T02:00:00" in start for start in starts), starts


def _processes_of_flow_run(flow_run_id: str) -> list[int]:
    """Pids whose environment names this flow run (the process worker passes PREFECT__FLOW_RUN_ID)."""
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"PREFECT__FLOW_RUN_ID={flow_run_id}".encode() in environ.read_bytes().split(b"\0"):
                pids.append(int(environ.parent.name))
        except OSError:
            continue
    return pids


def _flow_run(env: dict[str, str], flow_run_id: str) -> dict:
    return httpx.get(f"{env['PREFECT_API_URL']}/flow_runs/{flow_run_id}", timeout=10).json()


def test_stop_ends_inflight_flow_runs_and_frees_the_concurrency_slot(local_server) -> None:
    """`prefect-local.sh stop` during a run: no flow process survives, the run is marked Cancelled, and after a
    restart the deployment (concurrency_limit 1) runs again instead of waiting for a slot forever.

    It stops and restarts the module's server (the fixture stops it for good; a test after this one would find it
    restarted, its state kept: the SQLite DB is in the project's ``.cache/prefect-local``)."""
    project, env = local_server
    port = str(httpx.URL(env["PREFECT_API_URL"]).port)
    script = ["bash", str(ROOT / "scripts" / "prefect-local.sh")]

    def sh(*args: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*script, *args], check=False, cwd=project, env=env, capture_output=True, text=True,
                              timeout=timeout)

    created = subprocess.run(
        [str(BIN / "prefect"), "deployment", "run", "train/train", "--param",
         'overrides=["training.total_steps=200"]'], cwd=project, env=env, capture_output=True, text=True,
        timeout=60, check=True)
    flow_run_id = next(word for line in created.stdout.splitlines() if "UUID" in line
                       for word in line.split() if word.count("-") == 4)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (_flow_run(env, flow_run_id)["state_type"] == "RUNNING"
                                               and _processes_of_flow_run(flow_run_id)):
        time.sleep(1)
    assert _processes_of_flow_run(flow_run_id), "the long run never started"

    name = _flow_run(env, flow_run_id)["name"]
    stopped = sh("stop", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert f"cancelled flow run {name} ({flow_run_id})" in stopped.stdout, stopped.stdout
    time.sleep(1)
    assert _processes_of_flow_run(flow_run_id) == [], "a flow-run process outlived the stop"

    assert sh("start", "--port", port).returncode == 0
    run = _flow_run(env, flow_run_id)
    # cancelled through the API while the worker was still up: Cancelled, not Crashed, and the slot released
    assert run["state_type"] == "CANCELLED", run["state"]
    again = subprocess.run(
        [str(BIN / "prefect"), "deployment", "run", "train/train", "--param",
         'overrides=["training.total_steps=1"]', "--watch", "--watch-timeout", "300"],
        cwd=project, env=env, capture_output=True, text=True, timeout=330, check=False)
    if again.returncode != 0:
        run_id = next(word for line in again.stdout.splitlines() if "UUID" in line
                      for word in line.split() if word.count("-") == 4)
        logs = subprocess.run([str(BIN / "prefect"), "flow-run", "logs", run_id], cwd=project, env=env,
                              capture_output=True, text=True, timeout=60, check=False).stdout
        pytest.fail(f"the deployment did not run again after the stop:\n{logs[-4000:]}")
