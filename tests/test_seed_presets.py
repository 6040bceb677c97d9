"""Seed 000 as written: its section 2 example YAML, its section 3/6 preset commands, its section 6 numbers.

The YAML below is copied from the runbook character for character; the commands are the runbook's with
``scripts/train_graphplanner_rllm.py`` spelled ``gp train`` (docs/seed_compatibility.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config import load_run_config, preflight_check
from graph_planner.training.verl.config import verl_gpu_layout

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

#: Seed 000 section 2, "示例 YAML（片段）", verbatim.
SEED_EXAMPLE_YAML = """\
experiment:
  name: planner_grpo
  seed: 1234
paths:
  dataset_train: datasets/r2e_gym/train.jsonl
  dataset_val: datasets/r2e_gym/val.jsonl
  planner_model: models/Qwen3-14B
  cgm_model: models/CodeFuse-CGM
training:
  total_epochs: 1
  train_batch_size: 4
  grad_accum_steps: 8
  precision: bf16
parallel:
  tensor_parallel_planner: 4
  tensor_parallel_cgm: 4
  replicas: 1
  parallel_agents: 4
resources:
  num_gpus: 8
  ray_num_gpus: 8
logging:
  output_dir: outputs
  wandb:
    enabled: true
    project: graph-planner
    run_name: planner-grpo-8g
"""

#: Seed 000 section 6, "关键字段" column, per preset (planner_8g: the section 2 example's parallel/resources).
SECTION_6 = {
    "planner_debug": {
        "parallel.tensor_parallel_planner": 1, "parallel.tensor_parallel_cgm": 1, "parallel.parallel_agents": 1,
        "parallel.rollout_workers": 1, "resources.num_gpus": 1,
        "backends.device_map_planner": [0], "backends.device_map_cgm": [0],
    },
    "planner_8g": {
        "parallel.tensor_parallel_planner": 4, "parallel.tensor_parallel_cgm": 4, "parallel.replicas": 1,
        "parallel.parallel_agents": 4, "resources.num_gpus": 8, "resources.ray_num_gpus": 8,
    },
    "planner_cgm_8g": {
        "parallel.tensor_parallel_planner": 4, "parallel.tensor_parallel_cgm": 4, "parallel.parallel_agents": 4,
        "parallel.rollout_workers": 4, "resources.num_gpus": 8,
        "backends.device_map_planner": [0, 1, 2, 3], "backends.device_map_cgm": [4, 5, 6, 7],
    },
    "gp_full_73b14b_16g": {
        "parallel.tensor_parallel_planner": 8, "parallel.tensor_parallel_cgm": 8, "parallel.parallel_agents": 8,
        "parallel.rollout_workers": 8, "parallel.workflow_parallel": 10, "resources.num_gpus": 16,
        "backends.device_map_planner": list(range(8)), "backends.device_map_cgm": list(range(8, 16)),
    },
}
#: The section 6 note: every preset names these weights.
MODELS = {"paths.planner_model": "models/Qwen3-14B", "paths.cgm_model": "models/CodeFuse-CGM"}


def dotted(tree: dict, key: str):
    for part in key.split("."):
        tree = tree[part]
    return tree


def leaves(tree: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(leaves(value, name + "."))
        else:
            out[name] = value
    return out


def test_seed_example_yaml_loads_verbatim_and_names_its_run_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("planner.yaml").write_text(SEED_EXAMPLE_YAML, encoding="utf-8")
    result = runner.invoke(app, ["train", "--config-file", "planner.yaml", "--yaml-only", "--print-config"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.stdout)
    for key, value in leaves(yaml.safe_load(SEED_EXAMPLE_YAML)).items():
        assert dotted(printed, key) == value, key
    # "实际运行目录 = output_dir / wandb.run_name", written back into the config
    assert printed["resolved_run_dir"] == "outputs/planner-grpo-8g"
    assert printed["resolved_config_path"] == "outputs/planner-grpo-8g/resolved_config.yaml"
    config = load_run_config(Path("planner.yaml"))
    assert preflight_check(config).ok  # TP 4 + 4 <= 8, replicas 1 x 4 <= 8


def test_planner_8g_preset_is_the_seed_example_plus_run_settings():
    preset = yaml.safe_load((ROOT / "configs/experiments/planner_8g.yaml").read_text(encoding="utf-8"))
    for key, value in leaves(yaml.safe_load(SEED_EXAMPLE_YAML)).items():
        assert dotted(preset, key) == value, f"planner_8g.yaml {key} differs from seed 000 section 2"


@pytest.mark.parametrize("preset", sorted(SECTION_6))
def test_section_6_commands_print_the_seed_numbers(preset):
    # seed 000 section 6: train_graphplanner_rllm.py --config-file configs/experiments/<preset>.yaml --yaml-only
    #                     --print-config (planner_debug's row omits --print-config; it would start training)
    result = runner.invoke(app, ["train", "--config-file", f"configs/experiments/{preset}.yaml", "--yaml-only",
                                 "--print-config", "--model-path", "ignored/by/yaml-only"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.stdout)
    for key, value in {**SECTION_6[preset], **MODELS}.items():
        assert dotted(printed, key) == value, f"{preset}: {key}"
    assert printed["resolved_config_path"].startswith("outputs/")


@pytest.mark.parametrize("preset", sorted(SECTION_6))
def test_section_6_presets_pass_preflight_and_pin_their_gpus(preset):
    config = load_run_config(ROOT / f"configs/experiments/{preset}.yaml")
    report = preflight_check(config)
    assert report.ok
    if preset == "planner_debug":  # TP 1 + 1 on one card: co-location the seed means, not a broken rule
        assert report.colocated == [0]
    else:
        assert report.colocated == []
    if config.training.backend == "verl" and config.backends.gpus("planner"):
        assert verl_gpu_layout(config).total == len(config.backends.gpus("planner"))


def test_colocation_rules_still_catch_real_mistakes():
    base = {"resources.num_gpus": 1, "resources.ray_num_gpus": 1, "parallel.tensor_parallel_cgm": 1}
    # without GPU lists the seed's rule 1 holds as written
    with pytest.raises(ValueError, match=r"tensor_parallel_planner \(1\) \+ tensor_parallel_cgm \(1\) = 2 > "):
        preflight_check(load_run_config(None, base))
    # lists naming a GPU that does not exist, or fewer GPUs than TP
    bad = load_run_config(None, {**base, "backends.device_map_planner": [0], "backends.device_map_cgm": [1],
                                 "parallel.tensor_parallel_planner": 2})
    with pytest.raises(ValueError) as exc:
        preflight_check(bad)
    assert "device_map_cgm [1] names GPU(s) [1] beyond num_gpus x num_nodes = 1" in str(exc.value)
    assert "tensor_parallel_planner (2) > the 1 GPU(s) of backends.device_map_planner [0]" in str(exc.value)
    # one engine pinned, the other must fit in what is left
    half = load_run_config(None, {"resources.num_gpus": 8, "resources.ray_num_gpus": 8,
                                  "parallel.tensor_parallel_planner": 4, "parallel.tensor_parallel_cgm": 4,
                                  "backends.device_map_planner": [0, 1, 2, 3, 4, 5]})
    with pytest.raises(ValueError, match=r"tensor_parallel_cgm \(4\) > the 2 GPU\(s\) left"):
        preflight_check(half)


def test_gpu_lists_are_validated():
    for bad in ([], [-1], [0, 0]):
        with pytest.raises(ValueError, match="device_map_planner"):
            load_run_config(None, {"backends.device_map_planner": bad})


def test_reproduce_command_reloads_the_frozen_config(tmp_path, monkeypatch):
    """Seed 000 section 3.3: --config-file outputs/planner-grpo-8g/resolved_config.yaml --yaml-only."""
    monkeypatch.chdir(tmp_path)
    Path("planner.yaml").write_text(SEED_EXAMPLE_YAML, encoding="utf-8")
    result = runner.invoke(app, ["config", "--config-file", "planner.yaml", "--set", "training.lr=3e-6"])
    assert result.exit_code == 0, result.output
    frozen = Path("outputs/planner-grpo-8g/resolved_config.yaml")
    assert result.stdout.strip() == str(frozen) and frozen.is_file()
    again = runner.invoke(app, ["train", "--config-file", str(frozen), "--yaml-only", "--print-config",
                                "--seed", "7"])
    assert again.exit_code == 0, again.output
    printed = yaml.safe_load(again.stdout)
    assert printed["training"]["lr"] == 3e-6 and printed["experiment"]["seed"] == 1234  # --seed ignored
    assert yaml.safe_load(frozen.read_text()) == printed


def test_cli_run_name_beats_the_wandb_run_name(tmp_path):
    cfg = load_run_config(None, {"logging.wandb.run_name": "planner-grpo-8g", "experiment.run_name": "mine",
                                 "logging.output_dir": str(tmp_path)})
    assert cfg.resolved_run_dir == str(tmp_path / "mine")
    assert load_run_config(None, {}).resolved_run_dir == "outputs/graph-planner"  # seed default output_dir


def test_gpu_lists_become_hf_placements():
    from graph_planner.models.chat import hf_placement

    assert hf_placement([0]) == {"device_map": {"": 0}}  # one card: everything on it
    assert hf_placement([4, 5], "70GiB") == {"device_map": "auto", "max_memory": {4: "70GiB", 5: "70GiB"}}
    assert hf_placement("auto") == {"device_map": "auto"}
