"""One train API (graph_planner/training/api.py): `gp train` and the Prefect train task give the same outcome on
the same config (local engine: a real toy-model run with a scripted rollout, no env episodes), the verl job gets
the same data files from both (val-file rule), one Ray-address precedence, one prepull decision, one checkpoint
finder, the CLI's training.backend applied before the YAML is validated, and gp sft / gp smoke refuse model paths
that cannot load. The Ray cluster of the verl cases is faked (a real job on a real head:
tests/test_training_verl_job.py); everything else runs for real."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shlex
from pathlib import Path

import pytest
from prefect import flow
from test_run_dirs import PromptTask, scripted_rollout
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config.checkpoints import final_model, run_dir_of
from graph_planner.config.loader import ConfigError, load_run_config
from graph_planner.integrations.ray_cluster import prepull_here, user_cluster_address
from graph_planner.training.api import verl_step_metrics
from graph_planner.training.ray import job as ray_job
from graph_planner.training.verl.config import verl_data_files

runner = CliRunner()
TINY = {"training.total_steps": 2, "training.total_epochs": 10, "training.train_batch_size": 2,
        "training.ppo_mini_batch_size": 2, "training.group_size": 2, "logging.save_interval": 1,
        "training.torch_threads": 1, "logging.log_backend": "jsonl", "logging.output_dir": "runs"}


def as_set_flags(overrides: dict[str, object]) -> list[str]:
    return [item for key, value in overrides.items() for item in ("--set", f"{key}={value}")]


@flow(name="train-step-api")
def train_step_only(config_file: str, registry: str) -> str:
    from tasks.training import run_training

    return run_training(config_file, registry)


def weights_digest(model_dir: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(model_dir.glob("*.safetensors")):
        digest.update(file.read_bytes())
    return digest.hexdigest()


def metric_rows(run_dir: Path) -> dict[int, dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["metrics"] for r in rows if r.get("kind") == "metrics" and r["step"] > 0}


@pytest.mark.slow
def test_cli_and_prefect_task_train_the_same_local_run(flow_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from graph_planner.training.local import rollout

    monkeypatch.setattr(rollout, "make_env_rollout", lambda config: ([PromptTask(0), PromptTask(1)], scripted_rollout))
    threads = torch.get_num_threads()
    result = runner.invoke(app, ["train", "--run-name", "cli", *as_set_flags(TINY)])
    assert result.exit_code == 0, result.output
    config = load_run_config(None, {**TINY, "experiment.run_name": "task"}, write=True)
    state = train_step_only(config.resolved_config_path, str(flow_workspace / "registry"), return_state=True)
    torch.set_num_threads(threads)
    assert state.is_completed(), state.message

    cli_run, task_run = flow_workspace / "runs" / "cli", flow_workspace / "runs" / "task"
    assert "trained to step 2" in result.output
    assert Path(state.result()).resolve() == task_run / "checkpoints" / "step_2" / "model"
    cli_model, task_model = final_model(cli_run), final_model(task_run)
    assert cli_model is not None and task_model is not None
    assert cli_model.step == task_model.step == 2
    assert weights_digest(cli_model.model_dir) == weights_digest(task_model.model_dir)  # same seed, same updates
    cli_rows, task_rows = metric_rows(cli_run), metric_rows(task_run)
    assert sorted(cli_rows) == sorted(task_rows) == [1, 2]
    assert [cli_rows[s]["loss"] for s in (1, 2)] == [task_rows[s]["loss"] for s in (1, 2)]


# --- the verl engine: the same job arguments from both callers ------------------------------------------------

class RecordingRayClient:
    """Stands in for ray.job_submission.JobSubmissionClient (no cluster can be provoked into this here cheaply):
    records every submitted entrypoint."""

    def __init__(self) -> None:
        self.entrypoints: list[str] = []
        self.ids: list[str] = []

    def get_job_info(self, submission_id: str):
        if submission_id not in self.ids:
            raise RuntimeError(f"Job {submission_id} does not exist")
        return object()

    def get_address(self) -> str:
        return "http://fake:8265"

    def submit_job(self, *, submission_id: str, entrypoint: str, **_: object) -> str:
        self.ids.append(submission_id)
        self.entrypoints.append(entrypoint)
        return submission_id


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> RecordingRayClient:
    client = RecordingRayClient()

    def follow_job(_client, job_id: str, _deadline: float, sink) -> int:
        sink("step:1 - actor/pg_loss:0.25 - critic/score/mean:0.5")
        return ray_job.EXIT_SUCCEEDED

    monkeypatch.setattr(ray_job, "ray_cluster",
                        lambda config, run_dir: contextlib.nullcontext(ray_job.Cluster("http://fake:8265")))
    monkeypatch.setattr(ray_job, "connect", lambda address: client)
    monkeypatch.setattr(ray_job, "check_cluster_gpus", lambda config, address: None)
    monkeypatch.setattr(ray_job, "follow_job", follow_job)
    return client


#: local_debug on the verl engine with one logical GPU (preflight passes) and its data under the workspace.
VERL = {"training.backend": "verl", "training.total_steps": 1, "resources.num_gpus": 1, "resources.ray_num_gpus": 1,
        "parallel.tensor_parallel_cgm": 0, "data.output_dir": "prepared"}


def data_args(entrypoint: str) -> dict[str, str]:
    words = shlex.split(entrypoint)
    return {w: words[i + 1] for i, w in enumerate(words) if w in ("--train-files", "--val-files")}


@pytest.mark.parametrize("with_val", [False, True], ids=["no-val-file", "val-file-beside-train"])
def test_cli_and_task_give_the_verl_job_the_same_data_files_fake_ray(
        flow_workspace: Path, fake_ray: RecordingRayClient, with_val: bool) -> None:
    registry = flow_workspace / "prepared" / "registry"
    dataset = registry / "graph_planner_sample"
    dataset.mkdir(parents=True)
    (dataset / "train.parquet").write_bytes(b"")  # the fake job never reads it
    if with_val:
        (dataset / "val.parquet").write_bytes(b"")

    cli = runner.invoke(app, ["train", "-c", "configs/experiments/local_debug.yaml", "--run-name", "cli",
                              *as_set_flags(VERL)])
    assert cli.exit_code == 0, cli.output
    config = load_run_config("configs/experiments/local_debug.yaml", {**VERL, "experiment.run_name": "task"},
                             write=True)
    state = train_step_only(config.resolved_config_path, str(registry), return_state=True)
    assert state.is_completed(), state.message

    cli_args, task_args = (data_args(e) for e in fake_ray.entrypoints)
    assert cli_args == task_args
    assert cli_args["--train-files"] == str((dataset / "train.parquet").resolve())
    assert cli_args.get("--val-files") == (str((dataset / "val.parquet").resolve()) if with_val else None)


def test_an_explicit_missing_val_file_is_refused_before_anything_runs_fake_ray(
        flow_workspace: Path, fake_ray: RecordingRayClient) -> None:
    train = flow_workspace / "train.parquet"
    train.write_bytes(b"")
    result = runner.invoke(app, ["train", "-c", "configs/experiments/local_debug.yaml", "--run-name", "typo",
                                 "--train-files", str(train), "--val-files", "vall.parquet", *as_set_flags(VERL)])
    assert result.exit_code == 2
    assert "val file not found: vall.parquet" in result.output
    assert fake_ray.entrypoints == [] and not (flow_workspace / "runs" / "typo").exists()


def test_val_rule_and_the_job_entry_agree(tmp_path: Path) -> None:
    from graph_planner.training.verl import entry as verl_entry

    config = load_run_config(None, {"data.output_dir": str(tmp_path)})
    (tmp_path / "alone").mkdir()
    alone = tmp_path / "alone" / "train.parquet"
    alone.write_bytes(b"")
    assert verl_data_files(config, str(alone)).val is None  # nothing beside it: no validation, no refusal
    (tmp_path / "alone" / "val.parquet").write_bytes(b"")
    assert verl_data_files(config, str(alone)).val == str(tmp_path / "alone" / "val.parquet")
    with pytest.raises(FileNotFoundError, match="val file not found"):
        verl_data_files(config, str(alone), str(tmp_path / "missing.parquet"))
    config_file = load_run_config(None, {"data.output_dir": str(tmp_path), "logging.output_dir": str(tmp_path)},
                                  write=True).resolved_config_path
    assert verl_entry.main(["--config-file", str(config_file), "--train-files", str(alone),
                            "--val-files", str(tmp_path / "missing.parquet"), "--dry-run"]) == 1


# --- one Ray address, one prepull decision, one checkpoint finder ------------------------------------------------

def test_ray_address_precedence_explicit_then_config_then_env_then_private(monkeypatch: pytest.MonkeyPatch) -> None:
    from graph_planner.eval.ray_executor import cluster_address

    configured = load_run_config(None, {"resources.ray_address": "http://config:8265"})
    plain = load_run_config(None, {})
    monkeypatch.setenv("RAY_ADDRESS", "http://env:8265")
    assert user_cluster_address(configured.resources, "http://explicit:8265") == "http://explicit:8265"
    assert user_cluster_address(configured.resources) == "http://config:8265"
    assert user_cluster_address(plain.resources) == "http://env:8265"
    assert cluster_address(plain) == "http://env:8265"  # eval's Ray executor reads the same resolution
    with ray_job.ray_cluster(plain, Path("unused")) as cluster:  # and the verl job: no private head started
        assert cluster.address == "http://env:8265" and cluster.head is None
    monkeypatch.delenv("RAY_ADDRESS")
    assert user_cluster_address(plain.resources) is None  # a private head
    assert cluster_address(plain) is None


def test_prepull_is_skipped_only_when_every_stage_runs_its_sandboxes_on_a_user_cluster(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    remote_verl = {"images.prepull": True, "training.backend": "verl", "resources.ray_address": "http://c:8265"}
    assert not prepull_here(load_run_config(None, remote_verl), ["train"])
    assert prepull_here(load_run_config(None, remote_verl), ["train", "eval"])  # eval runs here (executor=local)
    assert not prepull_here(load_run_config(None, {**remote_verl, "eval.executor": "ray"}), ["train", "eval"])
    assert prepull_here(load_run_config(None, {"images.prepull": True, "training.backend": "verl"}), ["train"])
    assert not prepull_here(load_run_config(None, {"images.prepull": False}), ["train"])


def test_checkpoint_finder_reads_both_engines_layouts(tmp_path: Path) -> None:
    local = tmp_path / "local"
    for step in (1, 2):
        (local / "checkpoints" / f"step_{step}" / "model").mkdir(parents=True)
        (local / "checkpoints" / f"step_{step}" / "trainer_state.pt").write_bytes(b"")
    (local / "checkpoints" / "latest").write_text("step_1")  # the pointer wins over the newest name
    (local / "resolved_config.yaml").write_text("{}\n")
    found = final_model(local)
    assert found is not None and found.step == 1 and found.model_dir == local / "checkpoints/step_1/model"
    assert run_dir_of(found.model_dir) == local

    verl = tmp_path / "verl"
    for step in (2, 10):
        hf = verl / "checkpoints" / f"global_step_{step}" / "actor" / "huggingface"
        hf.mkdir(parents=True)
        (hf / "model.safetensors").write_bytes(b"")
    (verl / "checkpoints" / "global_step_11" / "actor").mkdir(parents=True)  # no HF weights: skipped
    found = final_model(verl)
    assert found is not None and found.step == 10 and found.checkpoint == verl / "checkpoints/global_step_10"
    assert final_model(tmp_path / "empty") is None
    assert run_dir_of(found.model_dir) is None  # no resolved config above it


def test_verl_console_line_gives_the_step_and_its_metrics() -> None:
    assert verl_step_metrics("step:3 - actor/pg_loss:-0.25 - critic/score/mean:0.5 - timing_s/gen:1.2") == (
        3, {"actor/pg_loss": -0.25, "critic/score/mean": 0.5, "timing_s/gen": 1.2})
    assert verl_step_metrics("(TaskRunner pid=1) Training Progress: 10%") is None


# --- the config and the other commands ---------------------------------------------------------------------------

def test_cli_backend_applies_before_the_yaml_is_validated(tmp_path: Path) -> None:
    yaml_file = tmp_path / "gae.yaml"
    yaml_file.write_text("training:\n  adv_estimator: gae\n  critic_warmup: 1\n", encoding="utf-8")
    config = load_run_config(yaml_file, {"training.backend": "verl"})
    assert config.training.backend == "verl" and config.training.adv_estimator == "gae"
    with pytest.raises(ConfigError, match=r"gae.yaml.*\n.*needs training.backend=verl"):
        load_run_config(yaml_file, {})  # the file alone is still judged (and named) on the local backend
    result = runner.invoke(app, ["config", "-c", str(yaml_file), "--set", "training.backend=verl",
                                 "--output-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output


def test_sft_and_smoke_refuse_model_paths_that_cannot_load(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-model")
    sft = runner.invoke(app, ["sft", "--output-dir", str(tmp_path / "runs"), "--set", f"paths.planner_model={missing}"])
    assert sft.exit_code == 2 and f"paths.planner_model='{missing}': does not exist" in sft.output
    smoke = runner.invoke(app, ["smoke", "--synthesizer", "hf", "--report", str(tmp_path / "smoke.json"),
                                "--output-dir", str(tmp_path / "runs"), "--set", f"paths.cgm_model={missing}"])
    assert smoke.exit_code == 2 and f"paths.cgm_model='{missing}': does not exist" in smoke.output
    assert not (tmp_path / "smoke.json").exists()
    # refused before the run dir is claimed: no run dir, no resolved_config.yaml, no `-latest` link
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir()), \
        sorted(str(p) for p in (tmp_path / "runs").rglob("*"))


def test_a_refused_sft_leaves_a_named_runs_earlier_config_as_it_was(tmp_path: Path) -> None:
    """A refusal must not overwrite the resolved_config.yaml of the run it names (users resume from it)."""
    runs = tmp_path / "runs"
    first = runner.invoke(app, ["config", "--output-dir", str(runs), "--run-name", "mine"])
    assert first.exit_code == 0, first.output
    before = (runs / "mine" / "resolved_config.yaml").read_bytes()
    missing = str(tmp_path / "no-such-model")
    sft = runner.invoke(app, ["sft", "--output-dir", str(runs), "--run-name", "mine",
                              "--set", f"paths.planner_model={missing}"])
    assert sft.exit_code == 2, sft.output
    assert (runs / "mine" / "resolved_config.yaml").read_bytes() == before
