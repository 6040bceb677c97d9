"""W&B in offline mode (no network here): the run file read back holds the metrics and the secret-free config."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from graph_planner.config.loader import load_run_config
from graph_planner.telemetry.trackers import make_tracker
from graph_planner.telemetry.wandb_offline import WandbFileError, iter_record_bytes, read_offline_run

SECRETS = {
    "wandb_key": "wk-0123456789abcdef0123456789abcdef01234567",
    "hf": "hf_SECRETtokenSECRETtoken",
    "override": "ovr-SECRET-override-value",
    "env": "envkey-SECRET-from-environment",
    "planner": "sk-planner-SECRET-999",
}


@pytest.fixture(autouse=True)
def _hermetic_wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep wandb's global dirs inside tmp and make sure nothing points it at a server."""
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home" / var.lower()))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")


def _offline_config(tmp_path: Path, **extra: object):
    overrides = {
        "logging.output_dir": str(tmp_path / "runs"),
        "experiment.run_name": "wb",
        "logging.log_backend": "jsonl,tensorboard,stdout",
        "logging.wandb.project": "gp-test",
        "logging.tracker_kwargs": {"wandb": {"settings": {"x_disable_stats": True, "console": "off"}}},
    }
    overrides.update(extra)
    return load_run_config(cli_overrides=overrides, wandb_offline=True)


def test_wandb_offline_run_holds_metrics_and_config(tmp_path: Path) -> None:
    config = _offline_config(tmp_path, **{"training.lr": 3e-6})
    tracker = make_tracker(config)
    assert "wandb" in tracker.trackers
    for step in range(3):
        tracker.log({"reward/mean": 0.5 * step, "parallel/agents": 2.0}, step=step)
    tracker.log({"gpu/0/util": 40.0})  # heartbeat style: merged into the current step
    tracker.finish()

    run = read_offline_run(Path(config.resolved_run_dir) / "wandb")
    assert run.metric("reward/mean") == [(0, 0), (1, 0.5), (2, 1)]
    assert run.metric("gpu/0/util") == [(2, 40)]
    assert run.config["training"]["lr"] == 3e-6
    assert run.config["logging"]["wandb"]["offline"] is True
    assert run.config["experiment"]["run_name"] == "wb"
    assert run.summary["reward/mean"] == 1


def test_secrets_never_reach_any_tracker_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WANDB_API_KEY", SECRETS["env"])
    monkeypatch.setenv("PLANNER_API_KEY", SECRETS["planner"])
    config = _offline_config(
        tmp_path,
        **{
            "logging.wandb.api_key": SECRETS["wandb_key"],
            "data.hf_token": SECRETS["hf"],
            "verl_overrides.trainer.hub_token": SECRETS["override"],
            "experiment.notes": f"planner key {SECRETS['planner']}",
        },
    )
    with make_tracker(config) as tracker:
        tracker.log({"reward/mean": 1.0}, step=0)
    out = capsys.readouterr()
    run_dir = Path(config.resolved_run_dir)
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in files) and any("tfevents" in p.name for p in files)
    assert (run_dir / "metrics.jsonl").is_file()
    blobs = [p.read_bytes() for p in files] + [out.out.encode(), out.err.encode()]
    for name, secret in SECRETS.items():
        assert not any(secret.encode() in blob for blob in blobs), f"secret {name} leaked"
    run = read_offline_run(run_dir / "wandb")
    assert run.config["verl_overrides"]["trainer.hub_token"] is None
    assert run.config["backends"]["planner_api_key_env"] == "PLANNER_API_KEY"  # the env var's name is kept


def test_wandb_watch_logs_gradients_when_enabled(tmp_path: Path) -> None:
    config = _offline_config(
        tmp_path,
        **{"logging.log_backend": "stdout", "logging.wandb.watch.enabled": True, "logging.wandb.watch.log_freq": 1},
    )
    tracker = make_tracker(config)
    model = torch.nn.Linear(3, 1)
    tracker.watch(model)
    for step in range(2):
        model(torch.ones(2, 3)).sum().backward()
        tracker.log({"loss": 1.0}, step=step)
    tracker.finish()
    history = read_offline_run(Path(config.resolved_run_dir)).history
    keys = {k for row in history for k in row}
    assert {"gradients/weight", "gradients/bias"} <= keys
    histogram = next(row for row in history if "gradients/weight" in row)["gradients/weight"]
    assert histogram["_type"] == "histogram" and sum(histogram["values"]) == 3  # one count per weight


def test_wandb_watch_off_logs_no_gradients(tmp_path: Path) -> None:
    config = _offline_config(tmp_path, **{"logging.log_backend": "stdout"})
    tracker = make_tracker(config)
    model = torch.nn.Linear(3, 1)
    tracker.watch(model)
    model(torch.ones(2, 3)).sum().backward()
    tracker.log({"loss": 1.0}, step=0)
    tracker.finish()
    keys = {k for row in read_offline_run(Path(config.resolved_run_dir)).history for k in row}
    assert "loss" in keys and not any(k.startswith("gradients/") for k in keys)


def test_reader_rejects_non_wandb_file_and_corruption(tmp_path: Path) -> None:
    bogus = tmp_path / "run-x.wandb"
    bogus.write_bytes(b"not a run file")
    with pytest.raises(WandbFileError, match="not a W&B run file"):
        list(iter_record_bytes(bogus))
    config = _offline_config(tmp_path, **{"logging.log_backend": "stdout"})
    with make_tracker(config) as tracker:
        tracker.log({"a": 1.0}, step=0)
    (real,) = Path(config.resolved_run_dir).rglob("run-*.wandb")
    data = bytearray(real.read_bytes())
    data[20] ^= 0xFF
    broken = tmp_path / "run-broken.wandb"
    broken.write_bytes(bytes(data))
    with pytest.raises(WandbFileError, match="CRC mismatch"):
        read_offline_run(broken)



def test_wandb_runs_carry_tags_group_job_type_and_unique_names(tmp_path: Path) -> None:
    from graph_planner.telemetry.wandb_tracker import git_sha

    config = _offline_config(tmp_path, **{"logging.wandb.tags": ["ablation-a"]})
    names = []
    for job_type in ("train", "eval"):
        tracker = make_tracker(config, job_type=job_type)
        tracker.log({"reward/mean": 1.0}, step=1)
        links = tracker.links()
        tracker.finish()
        run = read_offline_run(Path(links["wandb_offline_dir"]))
        assert run.job_type == job_type
        assert run.group == "wb"  # the run name: a run's train and eval sit together
        assert f"config:{config.experiment.name}" in run.tags and "backend:local" in run.tags
        assert "ablation-a" in run.tags
        sha = git_sha()
        assert sha is None or f"git:{sha}" in run.tags
        assert run.name.startswith(f"wb-{job_type}-")
        names.append(run.name)
    assert len(set(names)) == 2


def test_wandb_explicit_name_and_group_win(tmp_path: Path) -> None:
    config = _offline_config(tmp_path, **{"logging.wandb.run_name": "mine", "logging.wandb.group": "pipeline-7"})
    tracker = make_tracker(config, job_type="eval")
    links = tracker.links()
    tracker.finish()
    run = read_offline_run(Path(links["wandb_offline_dir"]))
    assert (run.name, run.group, run.job_type) == ("mine", "pipeline-7", "eval")


def test_wandb_holds_eval_table_plots_and_opt_in_checkpoint(tmp_path: Path) -> None:
    from graph_planner.telemetry import plots

    config = _offline_config(tmp_path, **{"logging.wandb.log_checkpoints": True})
    png = plots.save_figure(plots.outcomes_figure({"resolved": 1, "timeout": 2}, "wb"), tmp_path / "outcomes.png")
    model_dir = tmp_path / "ckpt" / "model"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text("{}")
    tracker = make_tracker(config, job_type="eval")
    tracker.log_table("eval/tasks", ["instance_id", "resolved"], [{"instance_id": "t-1", "resolved": True},
                                                                   {"instance_id": "t-2", "resolved": False}])
    tracker.log_images({"outcomes": png, "missing": tmp_path / "nope.png"})
    tracker.log_artifact(model_dir, name="wb-model", kind="model")
    links = tracker.links()
    tracker.finish()
    run_dir = Path(links["wandb_offline_dir"])
    run = read_offline_run(run_dir)
    logged = {key for row in run.history for key in row}
    assert {"eval/tasks", "plots/outcomes"} <= logged and "plots/missing" not in logged
    table_row = next(row for row in run.history if "eval/tasks" in row)
    assert table_row["eval/tasks"]["_type"] == "table-file" and table_row["eval/tasks"]["nrows"] == 2
    models = [a for a in run.artifacts if a["type"] == "model"]  # (W&B also stores the table as a run_table)
    assert [a["name"] for a in models] == ["wb-model"] and "config.json" in models[0]["files"]


def test_train_and_eval_wandb_runs_sit_in_the_run_dir_and_the_report_names_both_syncable(tmp_path: Path) -> None:
    """One place per run: the eval's W&B run goes to ``<run dir>/wandb/`` beside the training's (it went to
    ``evals/<key>/eval/wandb``), and the report names both with a path ``wandb sync`` accepts as printed (it printed
    ``.../files``, where wandb finds "No runs to sync")."""
    import re
    import subprocess
    import sys

    from graph_planner.config.loader import write_resolved_config
    from graph_planner.config.paths import run_paths
    from graph_planner.eval.report import write_report
    from graph_planner.eval.results import TaskResult
    from graph_planner.telemetry.wandb_runs import wandb_runs
    from tasks.evaluation import report_artifact_markdown

    config = _offline_config(tmp_path)
    run_dir = run_paths(config).run_dir
    config_file = write_resolved_config(config)
    eval_dir = run_paths(config).evals / "0123abcd" / "eval"
    write_report(eval_dir, [TaskResult(instance_id="t-1", resolved=True, category="resolved", steps=3)],
                 total_tasks=1, run_name="wb")
    for job_type, where in (("train", None), ("eval", eval_dir)):
        tracker = make_tracker(config, where, job_type=job_type)
        tracker.log({"reward/mean": 1.0}, step=1)
        tracker.finish()

    assert not (eval_dir / "wandb").exists()
    assert len(list((run_dir / "wandb").glob("offline-run-*"))) == 2
    records = wandb_runs(run_dir)
    assert [(r.job_type, r.offline) for r in records] == [("train", True), ("eval", True)]

    markdown = report_artifact_markdown(config, str(config_file), eval_dir, None, None)
    synced = re.findall(r"^- W&B (train|eval) run \(offline\) wb-\1-\S+: `wandb sync (\S+)`$", markdown, re.M)
    assert [job for job, _ in synced] == ["train", "eval"], markdown
    wandb_cli = Path(sys.executable).parent / "wandb"
    for _, path in synced:
        assert Path(path).name.startswith("offline-run-") and read_offline_run(Path(path)).summary["reward/mean"] == 1
        dry = subprocess.run([str(wandb_cli), "sync", "--dry-run", path], capture_output=True, text=True, timeout=120,
                             check=False)
        assert "Would sync 1 run(s)" in dry.stdout + dry.stderr, dry.stdout + dry.stderr


def test_online_wandb_runs_get_a_link_artifact(prefect_harness: None) -> None:
    """A made-up online record stands in for a W&B server (none is reachable here); offline runs get no link."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from graph_planner.telemetry.wandb_runs import WandbRunRecord
    from tasks.evaluation import link_wandb_runs

    online = WandbRunRecord("train", "wb-train-1", "abc123", False, "https://wandb.ai/team/gp/runs/abc123", "/x/run-1")
    offline = WandbRunRecord("eval", "wb-eval-1", "def456", True, None, "/x/offline-run-2")
    link_wandb_runs("wb-links", [online, offline])
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_="wb-links-")))
    assert [(a.key, a.type) for a in found] == [("wb-links-wandb-train-abc123", "markdown")], found  # Prefect's link
    assert "https://wandb.ai/team/gp/runs/abc123" in str(found[0].data)
