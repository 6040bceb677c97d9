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
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A project dir (code and data linked from the repo, outputs private) with a server + worker running."""
    project = tmp_path_factory.mktemp("project")
    for name in ("configs", "datasets", "deployments", "flows", "tasks"):
        (project / name).symlink_to(ROOT / name)
    port = free_port()
    env = {**os.environ, "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_WORKER_QUERY_SECONDS": "2", "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5",
           "PREFECT_BIN": str(BIN), "HF_HUB_OFFLINE": "1"}
    script = ["bash", str(ROOT / "scripts" / "prefect-local.sh")]
    started = subprocess.run([*script, "start", "--port", str(port)], check=False, cwd=project, env=env, capture_output=True,
                             text=True, timeout=240)
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


def test_ci_trigger_exits_zero_for_a_good_run_and_writes_the_report(local_server) -> None:
    project, env = local_server
    done = deployment_run(env, project, "limit=1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Completed" in done.stdout
    reports = list((project / "runs" / "local_debug" / "evals").glob("*/eval/report.md"))
    assert len(reports) == 1 and "Evaluation report" in reports[0].read_text()


def test_ci_trigger_exits_one_for_a_failing_run(local_server) -> None:
    project, env = local_server
    done = deployment_run(env, project, "config_path=configs/experiments/does_not_exist.yaml")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Failed" in done.stdout + done.stderr


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
