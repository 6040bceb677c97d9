"""Run config: precedence, --yaml-only, resolved config round trip, secrets, validation errors, preflight."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config import ConfigError, RunConfig, load_run_config, preflight_check
from graph_planner.config.loader import config_to_dict

ROOT = Path(__file__).resolve().parents[1]
PRESETS = ["planner_debug", "planner_8g", "planner_cgm_8g", "gp_full_73b14b_16g", "local_debug"]
runner = CliRunner()


def write_yaml(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_precedence_defaults_then_yaml_then_cli(tmp_path):
    cfg_file = write_yaml(tmp_path / "c.yaml", {"training": {"lr": 3e-5, "total_steps": 7}})
    cfg = load_run_config(cfg_file, {"training.lr": 1e-6})
    assert cfg.training.lr == 1e-6  # CLI beats YAML
    assert cfg.training.total_steps == 7  # YAML beats default
    assert cfg.training.group_size == RunConfig().training.group_size  # default kept


def test_yaml_only_ignores_and_logs_cli_names(tmp_path, caplog):
    cfg_file = write_yaml(tmp_path / "c.yaml", {"training": {"lr": 3e-5}})
    with caplog.at_level(logging.WARNING):
        cfg = load_run_config(cfg_file, {"training.lr": 1e-6, "paths.planner_model": "x"}, yaml_only=True,
                              wandb_offline=True)
    assert cfg.training.lr == 3e-5
    assert cfg.paths.planner_model == "toy"
    assert cfg.logging.wandb.offline is True  # --wandb-offline still counts
    assert "training.lr" in caplog.text and "paths.planner_model" in caplog.text


def test_resolved_config_written_and_reloads_to_same_config(tmp_path):
    cfg = load_run_config(ROOT / "configs/experiments/planner_8g.yaml",
                          {"logging.output_dir": str(tmp_path), "training.lr": 2e-6}, write=True)
    path = Path(cfg.resolved_config_path)
    # seed 000: run dir = logging.output_dir / logging.wandb.run_name
    assert path == tmp_path / "planner-grpo-8g" / "resolved_config.yaml" and path.is_file()
    assert cfg.resolved_run_dir == str(tmp_path / "planner-grpo-8g")
    again = load_run_config(path, {"training.lr": 9.0}, yaml_only=True)
    assert config_to_dict(again) == config_to_dict(cfg)


def test_secrets_never_written(tmp_path):
    cfg = load_run_config(None, {"logging.output_dir": str(tmp_path), "logging.wandb.api_key": "wk-SECRET-1",
                                 "data.hf_token": "hf_SECRET_2"}, write=True)
    assert cfg.data.hf_token is not None and cfg.data.hf_token.get_secret_value() == "hf_SECRET_2"
    text = Path(cfg.resolved_config_path).read_text()
    assert "SECRET" not in text


@pytest.mark.parametrize(
    ("tree", "needle"),
    [
        ({"training": {"lrr": 1}}, "training.lrr: unknown key"),
        ({"bogus_section": {}}, "bogus_section: unknown key"),
        ({"training": {"total_steps": "many"}}, "training.total_steps"),
        ({"env": {"step_penalty": -0.05}}, "env.step_penalty"),
        ({"env": {"failure_penalty": -1}}, "env.failure_penalty"),
        ({"training": {"clip_ratio_low": 0.3, "clip_ratio_high": 0.2}}, "clip_ratio_high"),
        ({"logging": {"log_backend": "stdout,mlflow"}}, "mlflow"),
    ],
)
def test_bad_values_name_key_and_file(tmp_path, tree, needle):
    cfg_file = write_yaml(tmp_path / "bad.yaml", tree)
    with pytest.raises(ConfigError) as exc:
        load_run_config(cfg_file)
    assert needle in str(exc.value)
    assert str(cfg_file) in str(exc.value)


def test_set_override_parses_yaml_values_and_verl_passthrough():
    from graph_planner.config.cli_options import cli_overrides

    overrides = cli_overrides({"set_items": ["training.lr=1e-6", "env.use_rule_fallback=true",
                                             "verl_overrides.actor_rollout_ref.rollout.gpu_memory_utilization=0.6"]})
    cfg = load_run_config(None, overrides)
    assert cfg.training.lr == 1e-6 and cfg.env.use_rule_fallback is True
    assert cfg.verl_overrides == {"actor_rollout_ref.rollout.gpu_memory_utilization": 0.6}


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_load_and_pass_preflight(preset):
    cfg = load_run_config(ROOT / f"configs/experiments/{preset}.yaml")
    report = preflight_check(cfg)
    assert report.ok


def test_gpu_presets_use_their_gpus():
    cfg = load_run_config(ROOT / "configs/experiments/gp_full_73b14b_16g.yaml")
    assert cfg.resources.num_gpus * cfg.resources.num_nodes == 16
    assert cfg.training.backend == "verl"


def test_preflight_lists_every_broken_rule_and_three_fixes():
    cfg = load_run_config(None, {
        "resources.num_gpus": 4, "parallel.tensor_parallel_planner": 4, "parallel.tensor_parallel_cgm": 2,
        "parallel.replicas": 2, "parallel.parallel_agents": 8, "parallel.rollout_workers": 4,
        "parallel.workflow_parallel": 2, "resources.ray_num_gpus": 1, "resources.ray_num_cpus": 8,
    })
    with pytest.raises(ValueError) as exc:
        preflight_check(cfg)
    msg = str(exc.value)
    for rule in ["tensor_parallel_planner (4) + tensor_parallel_cgm (2)", "replicas (2) x max(TP) (4)",
                 "workflow_parallel (2) < max(parallel_agents, rollout_workers) (8)",
                 "ray_num_gpus (1) < parallel.replicas (2)", "ray_num_cpus (8) < 4 x rollout_workers (16)"]:
        assert rule in msg
    assert msg.count("fix ") == 3


def test_verl_backend_without_gpus_fails_preflight():
    cfg = load_run_config(None, {"training.backend": "verl"})
    with pytest.raises(ValueError, match="num_gpus x num_nodes = 0"):
        preflight_check(cfg)


def test_defaults_yaml_in_sync_with_schema():
    shipped = yaml.safe_load((ROOT / "configs/defaults.yaml").read_text())
    current = config_to_dict(RunConfig())
    current.pop("resolved_run_dir")
    current.pop("resolved_config_path")
    assert shipped == current, "regenerate configs/defaults.yaml (see its header)"


def test_cli_print_config_and_exit_codes(tmp_path):
    result = runner.invoke(app, ["config", "-c", str(ROOT / "configs/experiments/planner_8g.yaml"),
                                 "--set", "training.lr=5e-7", "--print-config"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.stdout)
    assert printed["training"]["lr"] == 5e-7 and printed["experiment"]["name"] == "planner_grpo"

    result = runner.invoke(app, ["config", "--output-dir", str(tmp_path), "--model-path", "/m",
                                 "--disable-cgm-synthesis", "--agent", "cgm"])
    assert result.exit_code == 0, result.output
    written = yaml.safe_load(Path(result.stdout.strip()).read_text())
    assert written["paths"]["planner_model"] == "/m"
    assert written["env"]["disable_cgm_synthesis"] is True and written["experiment"]["agent"] == "cgm"

    bad = write_yaml(tmp_path / "bad.yaml", {"env": {"timeout_penalty": -1}})
    result = runner.invoke(app, ["preflight", "-c", str(bad)])
    assert result.exit_code == 2 and "env.timeout_penalty" in result.output

    broken = write_yaml(tmp_path / "broken.yaml", {"parallel": {"parallel_agents": 4, "workflow_parallel": 1}})
    result = runner.invoke(app, ["preflight", "-c", str(broken)])
    assert result.exit_code == 1 and "workflow_parallel (1)" in result.output
