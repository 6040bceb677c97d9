"""The private Ray head is not an open door: token auth with a fresh token per head (0600 file in a 0700 dir that
also holds Ray's temp dir), clients that send it, nothing under ``HOME/.ray``, and a user's ``RAY_AUTH_MODE=token``
without a token refused at once (``gp train`` on a user's cluster, the eval Ray executor).

Every head here is started and stopped by PID (never ``ray stop``) with its own temp dir and ports.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from graph_planner.integrations.ray_auth import AUTH_VARS, PrivateRayAuth, user_auth_problem
from graph_planner.training.ray.head import LocalRayHead

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]


def _status(url: str, headers: dict[str, str]) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture(scope="module")
def fresh_home(tmp_path_factory):
    """A HOME with nothing in it, and Ray's auth variables as `make test` has them (token mode, no token)."""
    home = tmp_path_factory.mktemp("home")
    saved = {k: os.environ.get(k) for k in (*AUTH_VARS, "HOME")}
    for key in AUTH_VARS:
        os.environ.pop(key, None)
    os.environ.update({"HOME": str(home), "RAY_AUTH_MODE": "token"})
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def head(fresh_home, tmp_path_factory):
    with LocalRayHead(num_cpus=1, num_gpus=0, log_path=tmp_path_factory.mktemp("head") / "ray_head.log") as started:
        yield started


def test_the_token_file_is_private_and_holds_rays_temp_dir(head):
    auth = head.auth
    assert stat.S_IMODE(auth.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(auth.token_path.stat().st_mode) == 0o600
    assert len(auth.token) == 64 and head.temp_dir.is_relative_to(auth.root)
    assert head.temp_dir.is_dir()  # Ray's own temp dir (0777 as Ray makes it) is reachable only through ours


def test_the_head_answers_401_without_the_token_and_403_with_a_wrong_one(head):
    url = f"{head.dashboard_url}/api/jobs/"
    assert _status(url, {}) == 401
    assert _status(url, {"Authorization": "Bearer " + "0" * 64}) == 403
    assert _status(url, head.auth.headers()) == 200


def test_job_submission_is_refused_without_the_token_and_runs_with_it(head):
    from ray.job_submission import JobStatus, JobSubmissionClient

    with pytest.raises(Exception, match="(?i)auth|401|token"):
        JobSubmissionClient(head.dashboard_url, headers={"Authorization": "Bearer wrong"}).list_jobs()
    client = head.client()
    # the job's driver reaches the cluster through the token the head handed down (never through ~/.ray)
    entrypoint = f"{sys.executable} -c \"import ray; ray.init(); print('cpus', ray.cluster_resources().get('CPU'))\""
    job, deadline = f"auth-check-{os.getpid()}", time.monotonic() + 300
    while True:  # a loaded machine: the job agent may not be registered yet (HTTP 500) or drop the connection
        try:
            client.submit_job(entrypoint=entrypoint, submission_id=job)
            break
        except Exception as exc:  # noqa: BLE001 - RuntimeError from Ray's SDK, ConnectionError from requests
            if "already exists" in str(exc):  # an earlier try got through before its reply was lost
                break
            transient = "No available agent" in str(exc) or "Connection aborted" in str(exc)
            if not transient or time.monotonic() > deadline:
                raise
            time.sleep(2)
    while client.get_job_status(job) not in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
        assert time.monotonic() < deadline, client.get_job_logs(job)
        time.sleep(1)
    assert client.get_job_status(job) == JobStatus.SUCCEEDED, client.get_job_logs(job)
    assert "cpus 1.0" in client.get_job_logs(job)


def test_nothing_is_written_under_home_and_the_private_dir_goes_with_the_head(head, fresh_home):
    """Runs after the head's other tests (one head per module: each start costs ~30 s on a loaded machine)."""
    assert head.client().list_jobs() is not None
    assert not (fresh_home / ".ray").exists(), list((fresh_home / ".ray").rglob("*"))
    head.stop()  # what `gp train` does when its job ends (the fixture's own stop is then a no-op)
    assert not head.auth.root.exists() and head.own_pids() == []
    assert not (fresh_home / ".ray").exists()


def test_token_mode_without_a_token_is_refused_at_once(fresh_home, tmp_path):
    """`gp train` on a user's cluster with RAY_AUTH_MODE=token and no token: exit 2, one line, before any wait
    (Ray itself fails only after its start-up waits, with a message about ~/.ray)."""
    assert "no Ray auth token" in (user_auth_problem() or "")
    token = tmp_path / "token"
    token.write_text("t" * 64)
    assert user_auth_problem({**os.environ, "RAY_AUTH_TOKEN_PATH": str(token)}) is None
    assert user_auth_problem({**os.environ, "RAY_AUTH_TOKEN_PATH": str(tmp_path / "missing")})
    env = {**os.environ, "RAY_ADDRESS": "http://127.0.0.1:9"}  # a user's cluster (nothing listens there)
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "graph_planner.cli", "train", "-c",
                          str(ROOT / "configs" / "experiments" / "local_verl.yaml"),
                          "--set", f"logging.output_dir={tmp_path / 'runs'}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert "RAY_AUTH_MODE=token but no Ray auth token" in run.stderr + run.stdout
    assert time.monotonic() - started < 120
    assert not (fresh_home / ".ray").exists()


def test_the_eval_executor_refuses_token_mode_without_a_token_on_a_users_cluster(fresh_home):
    from graph_planner.config.schema import RunConfig
    from graph_planner.eval.ray_executor import executor_problems

    config = RunConfig.model_validate({"eval": {"executor": "ray"}, "resources": {"ray_address": "127.0.0.1:1"}})
    assert "no Ray auth token" in executor_problems(config)[0]
    private = RunConfig.model_validate({"eval": {"executor": "ray"}})
    assert executor_problems(private) == []  # a private cluster makes its own token


def test_a_private_auth_dir_is_fresh_each_time():
    first, second = PrivateRayAuth.create(), PrivateRayAuth.create()
    try:
        assert first.root != second.root and first.token != second.token
    finally:
        first.remove()
        second.remove()
    assert not first.root.exists()
