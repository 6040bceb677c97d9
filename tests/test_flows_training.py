"""The training task's verl path against a fake Ray client (a transient submit error cannot be provoked on a real
head): the job submission is retried on a transient error, the job's log lines stream as ``[ray] ...`` into the
run logger and the progress artifact, and a failed job fails the step without any retry. The real verl job on a
real head: tests/test_training_verl_job.py."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from prefect import flow

from flows.run_stats import settled_task_runs
from graph_planner.config.loader import load_run_config
from graph_planner.training.ray import job as ray_job
from tasks.training import run_training


@flow(name="train-step-only")
def train_step_only(config_file: str, registry: str) -> str:
    return run_training(config_file, registry)


class FakeRayClient:
    """Stands in for ray.job_submission.JobSubmissionClient (it fails the first submits on purpose)."""

    def __init__(self, fail_submits: int) -> None:
        self.fail_submits = fail_submits
        self.submitted: list[str] = []

    def get_job_info(self, submission_id: str):
        if submission_id not in self.submitted:
            raise RuntimeError(f"Job {submission_id} does not exist")
        return object()

    def get_address(self) -> str:
        return "http://127.0.0.1:8265"

    def submit_job(self, *, submission_id: str, **_: object) -> str:
        if self.fail_submits:
            self.fail_submits -= 1
            raise ConnectionError("connection refused by the Ray dashboard (simulated)")
        self.submitted.append(submission_id)
        return submission_id


@pytest.fixture
def verl_config(flow_workspace: Path) -> str:
    # one (logical) GPU: the train API runs verl's preflight, as `gp train` does
    config = load_run_config("configs/experiments/local_debug.yaml",
                             {"training.backend": "verl", "training.total_steps": 2, "resources.num_gpus": 1,
                              "resources.ray_num_gpus": 1, "parallel.tensor_parallel_cgm": 0}, write=True)
    # the registered train parquet the job is given (its contents are the fake job's business); no val.parquet
    (flow_workspace / config.data.dataset_name).mkdir(exist_ok=True)
    (flow_workspace / config.data.dataset_name / "train.parquet").write_bytes(b"")
    return str(config.resolved_config_path)


def fake_cluster(monkeypatch: pytest.MonkeyPatch, client: FakeRayClient, job_outcome: int,
                 run_dir: Path) -> list[str]:
    gpu_checks: list[str] = []

    def follow_job(_client, job_id: str, _deadline: float, sink) -> int:
        for step in (1, 2):
            sink(f"step:{step} - actor/pg_loss:0.1 - critic/score/mean:0.0")
        if job_outcome == ray_job.EXIT_SUCCEEDED:  # what verl writes at the end of a run
            hf = run_dir / "checkpoints/global_step_2/actor/huggingface"
            hf.mkdir(parents=True)
            (hf / "model.safetensors").write_bytes(b"")
        return job_outcome

    monkeypatch.setattr(ray_job, "ray_cluster",
                        lambda config, run_dir: contextlib.nullcontext(ray_job.Cluster("http://fake:8265")))
    monkeypatch.setattr(ray_job, "connect", lambda address: client)
    monkeypatch.setattr(ray_job, "check_cluster_gpus", lambda config, address: gpu_checks.append(address))
    monkeypatch.setattr(ray_job, "follow_job", follow_job)
    return gpu_checks


def runs_by_task(state) -> dict[str, list]:
    out: dict[str, list] = {}
    for run in settled_task_runs(state.state_details.flow_run_id, settle_s=1.0, timeout_s=30.0):
        out.setdefault(run.name.rsplit("-", 1)[0], []).append(run)
    return out


def test_verl_submission_retried_then_job_followed_to_its_checkpoint_fake_ray(
        verl_config: str, flow_workspace: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    client = FakeRayClient(fail_submits=1)
    gpu_checks = fake_cluster(monkeypatch, client, ray_job.EXIT_SUCCEEDED, Path(verl_config).parent)
    state = train_step_only(verl_config, str(flow_workspace), return_state=True)
    assert state.is_completed(), state.message
    assert state.result().endswith("checkpoints/global_step_2/actor/huggingface")
    runs = runs_by_task(state)
    assert runs["submit-ray-job"][0].run_count == 2 and len(client.submitted) == 1
    assert gpu_checks  # the cluster's GPUs are checked before submitting
    assert "[ray] step:2 - actor/pg_loss:0.1" in caplog.text


def test_failed_verl_job_fails_the_step_without_retry_fake_ray(
        verl_config: str, flow_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeRayClient(fail_submits=0)
    fake_cluster(monkeypatch, client, ray_job.EXIT_FAILED, Path(verl_config).parent)
    state = train_step_only(verl_config, str(flow_workspace), return_state=True)
    assert state.is_failed()
    assert "did not succeed" in str(state.message) or "did not succeed" in repr(state.data)
    runs = runs_by_task(state)
    assert runs["train"][0].run_count == 1 and runs["submit-ray-job"][0].run_count == 1
