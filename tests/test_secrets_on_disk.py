"""Secrets are never written: a real `gp eval` run with tokens planted on the command line (`--set` of the secret
config fields) and in the environment leaves none of them in any file it writes (results, predictions, report,
resolved_config.yaml, trajectories, metrics, the W&B offline run with its metadata) nor in its output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graph_planner.env.samples import LOCAL_DEBUG_CONFIG, prepare_bundled_samples

ROOT = Path(__file__).resolve().parents[1]
PLANTED = {
    "cli wandb key": "wk-PLANTED-cli-0123456789abcdef0123456789",
    "cli hf token": "hf_PLANTEDcliTOKEN0123456789",
    "env HF_TOKEN": "hf_PLANTEDenvTOKEN0123456789",
    "env WANDB_API_KEY": "PLANTED-env-wandb-0123456789abcdef01234567",
    "env OPENAI_API_KEY": "sk-PLANTED-env-openai-0123456789",
    "env PLANNER_API_KEY": "sk-PLANTED-env-planner-0123456789",
}


@pytest.mark.slow
def test_a_run_writes_no_planted_token_anywhere(tmp_path):
    prepared = prepare_bundled_samples(tmp_path / "prepared") / "swebench" / "test.jsonl"
    out = tmp_path / "runs"
    home = tmp_path / "wandb_home"
    env = {**os.environ, "HF_TOKEN": PLANTED["env HF_TOKEN"], "WANDB_API_KEY": PLANTED["env WANDB_API_KEY"],
           "OPENAI_API_KEY": PLANTED["env OPENAI_API_KEY"], "PLANNER_API_KEY": PLANTED["env PLANNER_API_KEY"],
           "WANDB_SILENT": "true", "WANDB_CONFIG_DIR": str(home / "config"), "WANDB_CACHE_DIR": str(home / "cache"),
           "WANDB_DATA_DIR": str(home / "data")}
    args = [sys.executable, "-m", "graph_planner.cli", "eval", "-c", str(LOCAL_DEBUG_CONFIG), "--dataset",
            str(prepared), "--limit", "1", "--run-name", "secrets", "--output-dir", str(out), "--wandb-offline",
            "--set", "logging.log_backend=jsonl,stdout", "--set", "backends.planner_backend=rule",
            "--set", "backends.cgm_backend=gold", "--set", f"paths.cache_dir={tmp_path / 'cache'}",
            "--set", f"logging.wandb.api_key={PLANTED['cli wandb key']}",
            "--set", f"data.hf_token={PLANTED['cli hf token']}",
            "--set", "logging.tracker_kwargs={wandb: {settings: {x_disable_stats: true, console: 'off'}}}"]
    run = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    files = [p for p in [*out.rglob("*"), *home.rglob("*")] if p.is_file()]
    names = {p.name for p in files}
    assert {"resolved_config.yaml", "results.jsonl", "predictions.jsonl", "report.json", "report.md"} <= names
    assert any(p.suffix == ".wandb" for p in files), sorted(names)
    blobs = {str(p): p.read_bytes() for p in files}
    blobs["stdout"], blobs["stderr"] = run.stdout.encode(), run.stderr.encode()
    leaks = [(what, where) for what, token in PLANTED.items() for where, blob in blobs.items()
             if token.encode() in blob]
    assert leaks == []


@pytest.mark.parametrize("override", ["logging.wandb.api_key=wk-abc", "data.hf_token=hf_abc",
                                      "verl_overrides.trainer.hub_token=x"])
def test_flows_refuse_secrets_as_parameters_which_prefect_stores_in_plain_text(override):
    from tasks.config import overrides_to_dict

    with pytest.raises(ValueError, match="secrets may not be flow parameters"):
        overrides_to_dict([override])
    assert overrides_to_dict(["training.lr=0.1", "backends.planner_api_key_env=MY_KEY"]) == {
        "training.lr": 0.1, "backends.planner_api_key_env": "MY_KEY"}
