"""The verl job entrypoint's --dry-run checks, the job config it reads, and `gp train` routing (no Ray here)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config.loader import load_run_config
from graph_planner.training.api import train
from graph_planner.training.ray.job import job_entrypoint, job_runtime_env, write_job_config
from graph_planner.training.verl import entry as verl_entry


def write_parquet(path: Path, rows: int = 3) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({
        "data_source": ["graph_planner/sample"] * rows,
        "prompt": [[{"role": "user", "content": f"fix task {i}"}] for i in range(rows)],
        "agent_name": ["graph_planner"] * rows,
    })
    pq.write_table(table, path)
    return path


def verl_config(tmp_path, **extra):
    config = load_run_config(None, {"training.backend": "verl", "logging.output_dir": str(tmp_path / "runs"),
                                    "experiment.run_name": "v", "resources.num_gpus": 2,
                                    "parallel.tensor_parallel_cgm": 0, **extra}, write=True)
    return config


def test_dry_run_passes_with_data_and_a_real_agent_loop(tmp_path, capsys):
    config = verl_config(tmp_path)
    train = write_parquet(tmp_path / "train.parquet", rows=5)
    code = verl_entry.main(["--config-file", config.resolved_config_path, "--train-files", str(train), "--dry-run"])
    assert code == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["dry_run"] == "ok" and report["data_rows"] == {"train": 5} and report["overrides"] > 40


def test_dry_run_names_every_problem(tmp_path, capsys):
    config = verl_config(tmp_path, verl_overrides={"~trainer.no_such_key": None})
    not_parquet = tmp_path / "val.parquet"
    not_parquet.write_text("not parquet")
    code = verl_entry.main(["--config-file", config.resolved_config_path, "--train-files", str(tmp_path / "nope"),
                            "--val-files", str(not_parquet), "--agent-loop", "graph_planner.no_such:Loop",
                            "--dry-run"])
    err = capsys.readouterr().err
    assert code == 1
    assert "train data" in err and "no such file" in err
    assert "val data" in err and "not a parquet file" in err
    assert "agent loop graph_planner.no_such:Loop: cannot import" in err
    assert "verl config:" in err and "no_such_key" in err


def test_missing_columns_and_non_agent_loop_class_are_reported(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"prompt": ["x"]}), path)
    assert "missing verl column(s) ['data_source']" in verl_entry.check_data_file(str(path), "train")[1]
    assert "not a subclass" in verl_entry.check_agent_loop("pathlib:Path")


def test_agent_loop_registry_file(tmp_path):
    cfg_path = tmp_path / "job.yaml"
    path = verl_entry.agent_loop_yaml(tmp_path, "pkg.loops:MyLoop", cfg_path)
    assert yaml.safe_load(path.read_text()) == [{"name": "graph_planner", "_target_": "pkg.loops.MyLoop",
                                                 "run_config_path": str(cfg_path)}]
    entries = yaml.safe_load(verl_entry.agent_loop_yaml(tmp_path, verl_entry.DEFAULT_AGENT_LOOP, cfg_path).read_text())
    assert {e["name"] for e in entries} >= {"graph_planner"}
    assert all(e["_target_"] == "graph_planner.training.verl.agent_loop.GraphPlannerAgentLoop"
               and e["run_config_path"] == str(cfg_path) for e in entries)


def test_job_config_uses_absolute_paths_and_reloads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt").mkdir()
    config = load_run_config(None, {"logging.output_dir": "runs", "experiment.run_name": "j",
                                    "paths.planner_model": "ckpt", "paths.cgm_model": "org/model"})
    path = write_job_config(config)
    assert path == tmp_path / "runs" / "j" / "verl" / "job_config.yaml"
    job = load_run_config(path, yaml_only=True)
    assert job.logging.output_dir == str(tmp_path / "runs")
    assert job.paths.planner_model == str(tmp_path / "ckpt")  # exists here: made absolute
    assert job.paths.cache_dir == str(tmp_path / ".cache" / "graph_planner")
    assert job.paths.cgm_model == "org/model"  # a hub id stays


def test_runtime_env_ships_code_not_data():
    env = job_runtime_env(load_run_config(None, {"logging.wandb.offline": True}))
    assert (Path(env["working_dir"]) / "graph_planner" / "training" / "verl" / "entry.py").is_file()
    assert {".venv", ".cache", "runs", "prepared", "*.parquet"} <= set(env["excludes"])
    assert env["env_vars"]["WANDB_MODE"] == "offline"
    assert job_entrypoint("/opt/py/bin/python", ["--config-file", "/r/a b.yaml"]) == \
        "/opt/py/bin/python -m graph_planner.training.verl.entry --config-file '/r/a b.yaml'"


def test_the_job_env_keeps_trls_experimental_warning_out_of_every_verl_process_log():
    """verl imports trl.experimental, which warns in every process of a job (2 lines each, ~14 a job); the job's
    env silences it the way TRL documents, and a user's resources.system_envs can still turn it back on."""
    import os
    import subprocess
    import sys

    env_vars = job_runtime_env(load_run_config(None, {}))["env_vars"]
    probe = [sys.executable, "-c", "import warnings; warnings.simplefilter('default'); import trl.experimental"]
    loud = subprocess.run(probe, capture_output=True, text=True, env={k: v for k, v in os.environ.items()
                                                                        if k != "TRL_EXPERIMENTAL_SILENCE"})
    quiet = subprocess.run(probe, capture_output=True, text=True,
                           env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": env_vars["TRL_EXPERIMENTAL_SILENCE"]})
    assert "TRLExperimentalWarning" in loud.stderr  # the probe sees the warning at all
    assert quiet.returncode == 0 and "TRLExperimentalWarning" not in quiet.stderr, quiet.stderr
    user = job_runtime_env(load_run_config(None, {"resources.system_envs": {"TRL_EXPERIMENTAL_SILENCE": "0"}}))
    assert user["env_vars"]["TRL_EXPERIMENTAL_SILENCE"] == "0"


def test_the_job_env_keeps_verls_missing_engine_warnings_out_of_the_job_log():
    """verl.workers.engine warns for each optional engine it lacks (5 warnings, 10 lines, in every verl process of
    a job); the job's PYTHONWARNINGS drops exactly those, and other UserWarnings still show."""
    import os
    import subprocess
    import sys

    env_vars = job_runtime_env(load_run_config(None, {}))["env_vars"]
    probe = [sys.executable, "-c", "import warnings, verl.workers.engine; warnings.warn('still shown', UserWarning)"]
    base = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    loud = subprocess.run(probe, capture_output=True, text=True, env=base)
    quiet = subprocess.run(probe, capture_output=True, text=True,
                           env={**base, "PYTHONWARNINGS": env_vars["PYTHONWARNINGS"]})
    assert "engine is not available" in loud.stderr  # the probe sees verl's warnings at all
    assert quiet.returncode == 0 and "engine is not available" not in quiet.stderr, quiet.stderr[-2000:]
    assert "still shown" in quiet.stderr


def test_local_backend_without_prepared_data_is_a_clear_error(tmp_path, capsys):
    config = load_run_config(None, {"logging.output_dir": str(tmp_path),
                                    "paths.dataset_train": str(tmp_path / "missing" / "train.jsonl")})
    outcome = train(config)
    assert outcome.exit_code == 2
    assert "missing/train.jsonl" in outcome.message and "gp data prepare" in outcome.message
    assert not (tmp_path / config.run_name).exists()  # refused before the run dir is written


def test_gp_train_verl_without_gpus_stops_at_preflight(tmp_path):
    result = CliRunner().invoke(app, ["train", "--output-dir", str(tmp_path), "--set", "training.backend=verl"])
    assert result.exit_code == 1
    assert "preflight failed" in result.output and "num_gpus x num_nodes = 0" in result.output



def test_unreachable_cluster_is_refused_with_the_address(tmp_path, caplog):
    from graph_planner.training.ray.job import EXIT_REFUSED, run_training_job

    config = load_run_config(None, {"training.backend": "verl", "resources.ray_address": "http://127.0.0.1:1",
                                    "logging.output_dir": str(tmp_path)})
    logger = logging.getLogger("graph_planner.training.ray.job")
    state = f"disabled={logger.disabled} propagate={logger.propagate} level={logger.level}"  # seen flaky once
    caplog.set_level(logging.INFO, logger=logger.name)
    assert run_training_job(config, ["--config-file", "x.yaml"]).code == EXIT_REFUSED
    assert "cannot reach the Ray dashboard at http://127.0.0.1:1" in caplog.text, (state, caplog.text)
