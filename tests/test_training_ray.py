"""The verl Ray job against a real local Ray head (`ray start --head`, token auth, no GPUs).

The head runs from this venv with its own temp dir, ports and auth token file, and is stopped in teardown
(SIGTERM to its ``ray start --block`` process, then any process left that still names the temp dir).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graph_planner.config.loader import load_run_config
from graph_planner.training.ray.head import free_ports
from graph_planner.training.ray.job import (
    EXIT_FAILED,
    EXIT_REFUSED,
    EXIT_SUCCEEDED,
    run_training_job,
    write_job_config,
)

pytestmark = pytest.mark.ray

def _leftovers(marker: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", marker], check=False, capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in out if int(pid) != os.getpid()]


def _set_client_auth(values: dict[str, str | None]) -> None:
    """Set Ray's auth variables in this process. A `gp train` process gets them from its environment at start;
    here Ray is already imported, so its cached config and token are re-read (Ray-internal calls, test only)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@pytest.fixture(scope="module")
def ray_head():
    from ray.job_submission import JobSubmissionClient

    tmp = Path(tempfile.mkdtemp(prefix="gpray", dir="/tmp"))  # short: Ray's unix socket paths must stay < 108 bytes
    token = tmp / "auth_token"
    token.write_text(secrets.token_hex(16))
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    venv_bin = Path(sys.executable).parent
    env = {**os.environ, **auth, "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}"}
    gcs, dashboard, client_port, agent, metrics, runtime_env = (str(p) for p in free_ports(6))
    cmd = [str(venv_bin / "ray"), "start", "--head", "--block", "--num-cpus", "1", "--num-gpus", "0",
           "--port", gcs, "--dashboard-host", "127.0.0.1", "--dashboard-port", dashboard,
           "--ray-client-server-port", client_port, "--dashboard-agent-listen-port", agent,
           "--metrics-export-port", metrics, "--runtime-env-agent-port", runtime_env,
           "--temp-dir", str(tmp / "r"), "--disable-usage-stats"]
    log_file = open(tmp / "head.log", "w")  # noqa: SIM115 - closed in teardown
    head = subprocess.Popen(cmd, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    saved = {k: os.environ.get(k) for k in auth}
    _set_client_auth(auth)  # the client side of token auth (Ray's own variables)
    url = f"http://127.0.0.1:{dashboard}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                client = JobSubmissionClient(url)
                break
            except Exception:  # noqa: BLE001 - dashboard not up yet
                if head.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"ray head did not start: {(tmp / 'head.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield url, client
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            head.kill()
        for pid in _leftovers(str(tmp)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log_file.close()
        shutil.rmtree(tmp, ignore_errors=True)
        _set_client_auth(saved)


def job_config(tmp_path, url, **extra):
    return load_run_config(None, {
        "training.backend": "verl", "resources.ray_address": url, "resources.ray_job_python": sys.executable,
        "resources.num_gpus": 8, "parallel.tensor_parallel_cgm": 0, "logging.output_dir": str(tmp_path / "runs"),
        "experiment.run_name": "rayjob", "resources.job_deadline_s": 300, **extra})


def entry_args(config, train: Path) -> list[str]:
    return ["--config-file", str(write_job_config(config)), "--train-files", str(train)]


@pytest.fixture()
def train_parquet(tmp_path):
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"data_source": ["s"], "prompt": [[{"role": "user", "content": "fix"}]]}), path)
    return path


def test_dry_run_job_succeeds(ray_head, tmp_path, train_parquet):
    url, client = ray_head
    lines: list[str] = []
    config = job_config(tmp_path, url)
    assert run_training_job(config, entry_args(config, train_parquet), dry_run=True, sink=lines.append).code == \
        EXIT_SUCCEEDED
    assert any('"dry_run": "ok"' in line for line in lines), lines[-20:]
    job = [j for j in client.list_jobs() if (j.metadata or {}).get("run_name") == "rayjob"][-1]
    assert job.status == "SUCCEEDED" and job.metadata["dry_run"] == "true"


def test_training_on_a_gpu_less_cluster_is_refused_before_submit(ray_head, tmp_path, train_parquet, caplog):
    url, client = ray_head
    before = len(client.list_jobs())
    config = job_config(tmp_path, url)
    assert run_training_job(config, entry_args(config, train_parquet), dry_run=False).code == EXIT_REFUSED
    assert "has 0 GPUs; the verl backend needs 8" in caplog.text
    assert len(client.list_jobs()) == before


def test_failing_entrypoint_exits_1(ray_head, tmp_path):
    url, _ = ray_head
    lines: list[str] = []
    config = job_config(tmp_path, url)
    args = ["--config-file", str(tmp_path / "missing.yaml")]
    assert run_training_job(config, args, dry_run=True, sink=lines.append).code == EXIT_FAILED
    assert any("missing.yaml" in line and "not found" in line for line in lines), lines[-20:]


def test_deadline_stops_the_job(ray_head, tmp_path, train_parquet, caplog):
    url, client = ray_head
    config = job_config(tmp_path, url, **{"resources.job_deadline_s": 1.0, "experiment.run_name": "late"})
    assert run_training_job(config, entry_args(config, train_parquet), dry_run=True, sink=lambda _: None).code == \
        EXIT_FAILED
    assert "passed its deadline" in caplog.text
    job = [j for j in client.list_jobs() if (j.metadata or {}).get("run_name") == "late"][-1]
    assert job.status == "STOPPED"
