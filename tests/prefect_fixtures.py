"""Prefect fixtures for the flow tests (``tests/test_flows_*.py``), requested explicitly, never autouse for the
whole suite: one session-wide test harness (temporary API server + SQLite) with flow heartbeats off (~0.1 s per
flow call instead of ~1.1 s), and a per-test workspace with its own outputs and result storage."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Seconds the harness waits for its API server; a loaded 2-core CI box needed ~45 s for the first migration.
SERVER_STARTUP_TIMEOUT = 120


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from prefect.settings import (
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        PREFECT_RESULTS_LOCAL_STORAGE_PATH,
        PREFECT_SERVER_ANALYTICS_ENABLED,
        temporary_settings,
    )
    from prefect.testing.utilities import prefect_test_harness

    storage = tmp_path_factory.mktemp("prefect-results")
    with (temporary_settings({PREFECT_SERVER_ANALYTICS_ENABLED: False, PREFECT_RESULTS_LOCAL_STORAGE_PATH: storage}),
          prefect_test_harness(server_startup_timeout=SERVER_STARTUP_TIMEOUT),
          temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})):
        yield


@pytest.fixture(scope="session")
def shared_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``paths.cache_dir`` for the session, so the toy checkpoint is built once, not per test."""
    return tmp_path_factory.mktemp("graph-planner-cache")


@pytest.fixture
def flow_workspace(prefect_harness: None, shared_model_cache: Path, tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working dir shaped like the project: ``configs/`` and ``datasets/`` linked from the repo, outputs
    (``prepared/``, ``runs/``) and Prefect results private to the test, so no test sees another's cache."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    for name in ("configs", "datasets"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "graph_planner").symlink_to(shared_model_cache)
    monkeypatch.chdir(tmp_path)
    with temporary_settings({PREFECT_RESULTS_LOCAL_STORAGE_PATH: tmp_path / ".prefect-results"}):
        yield tmp_path


#: The process work pool the deployments name (deployments/prefect.yaml).
WORK_POOL = "graph-planner-process"


@pytest.fixture(scope="session")
def harness_deployments(prefect_harness: None) -> dict[str, object]:
    """The deployments of deployments/prefect.yaml applied to the session's test server (no worker, no schedules:
    runs stay Scheduled unless a test moves them), by ``FLOW/DEPLOYMENT`` name; the parameter schemas are the ones
    `prefect deploy` sends, built from the same flow signatures."""
    import yaml
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.deployments.runner import RunnerDeployment
    from prefect.exceptions import ObjectAlreadyExists

    spec = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    with get_client(sync_client=True) as client:
        try:
            client.create_work_pool(WorkPoolCreate(name=WORK_POOL, type="process"))
        except ObjectAlreadyExists:
            pass
        out = {}
        for item in spec["deployments"]:
            deployment = RunnerDeployment.from_entrypoint(
                str(ROOT / item["entrypoint"]), name=item["name"], parameters=item["parameters"],
                description=item.get("description"), tags=item.get("tags"), work_pool_name=WORK_POOL,
                concurrency_limit=item.get("concurrency_limit"))
            deployment_id = deployment.apply()
            read = client.read_deployment(deployment_id)
            out[f"{deployment.flow_name}/{item['name']}"] = read
    return out


@contextmanager
def recording_webhook() -> Iterator[tuple[str, list[dict]]]:
    """An HTTP server on loopback standing in for a chat webhook: its URL and the requests POSTed to it, each as
    ``{"path", "content_type", "body"}`` (the body parsed as JSON)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    received: list[dict] = []

    class Record(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append({"path": self.path, "content_type": self.headers.get("Content-Type"),
                             "body": json.loads(body)})
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
