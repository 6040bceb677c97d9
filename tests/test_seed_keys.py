"""Config keys the seeds use (000 training/env/sampling keys, 004 ROLL keys): each loads with its meaning, maps to
its verl key (composed against the installed verl's Hydra schema) or local-backend behaviour, or is refused with
the reason. See docs/seed_compatibility.md."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml
from hydra import compose, initialize_config_dir

from graph_planner.config import ConfigError, RunConfig, load_run_config
from graph_planner.training import grpo
from graph_planner.training.ray.job import job_runtime_env
from graph_planner.training.verl.agent_loop import _clipped
from graph_planner.training.verl.config import VerlDataPaths, build_verl_overrides, verl_config_dir

VERL = {"training.backend": "verl", "resources.num_gpus": 2, "resources.ray_num_gpus": 2}


def from_yaml(tmp_path: Path, text: str, **cli):
    path = tmp_path / "seed.yaml"
    path.write_text(text, encoding="utf-8")
    return load_run_config(path, cli)


def overrides(config) -> dict[str, str]:
    items = build_verl_overrides(config, VerlDataPaths("/d/train.parquet"), "/r")
    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        compose(config_name="ppo_trainer", overrides=items)  # every key exists in verl 0.9.1 and parses
    return dict(item.split("=", 1) for item in items)


def refused(tree: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_run_config(None, tree)
    assert needle in str(exc.value)


# --- seed 000 keys ---------------------------------------------------------------------------------------------

def test_max_input_tokens_is_the_prompt_budget_on_both_backends():
    config = load_run_config(None, {**VERL, "planner_sampling.max_input_tokens": 4096})
    assert config.training.max_prompt_length == 4096
    assert overrides(config)["data.max_prompt_length"] == "4096"
    refused({"planner_sampling.max_input_tokens": 4096, "training.max_prompt_length": 1024}, "same budget")


def test_value_clip_and_target_kl_coefficients(tmp_path, caplog):
    config = from_yaml(tmp_path, "training:\n  value_coef: 0.5\n  clip_coef: 0.1\n", **VERL)
    assert (config.training.clip_ratio_low, config.training.clip_ratio_high) == (0.1, 0.1)
    got = overrides(config)
    assert got["actor_rollout_ref.actor.clip_ratio_low"] == got["actor_rollout_ref.actor.clip_ratio_high"] == "0.1"
    explicit = load_run_config(None, {"training.clip_coef": 0.1, "training.clip_ratio_high": 0.3})
    assert (explicit.training.clip_ratio_low, explicit.training.clip_ratio_high) == (0.1, 0.3)  # explicit wins
    refused({"training.target_kl": 0.05}, "target_kl needs a start coefficient, training.kl_coef (> 0) or "
                                          "training.init_kl_coef")
    kl = overrides(load_run_config(None, {**VERL, "training.init_kl_coef": 0.02, "training.target_kl": 0.05,
                                          "training.kl_horizon": 500}))
    assert (kl["algorithm.use_kl_in_reward"], kl["algorithm.kl_ctrl.type"], kl["algorithm.kl_ctrl.kl_coef"],
            kl["algorithm.kl_ctrl.target_kl"], kl["algorithm.kl_ctrl.horizon"]) == ("true", "adaptive", "0.02",
                                                                                   "0.05", "500")


def test_target_kl_with_kl_coef_starts_verls_adaptive_controller_from_kl_coef(tmp_path):
    """Seed 000's table gives kl_coef beside target_kl (PPO's adaptive KL): kl_coef is the controller's start value
    and no longer also the KL-loss weight (verl would penalise the divergence twice)."""
    config = from_yaml(tmp_path, "training:\n  backend: verl\n  kl_coef: 0.02\n  target_kl: 0.05\n", **VERL)
    assert (config.training.init_kl_coef, config.training.target_kl, config.training.kl_coef) == (0.02, 0.05, 0.0)
    got = overrides(config)
    assert (got["algorithm.use_kl_in_reward"], got["algorithm.kl_ctrl.type"], got["algorithm.kl_ctrl.kl_coef"],
            got["algorithm.kl_ctrl.target_kl"]) == ("true", "adaptive", "0.02", "0.05")
    assert got["actor_rollout_ref.actor.use_kl_loss"] == "false"
    again = RunConfig.model_validate(config.model_dump())  # the resolved config reloads to the same values
    assert again.training.model_dump() == config.training.model_dump()
    explicit = load_run_config(None, {**VERL, "training.kl_coef": 0.1, "training.init_kl_coef": 0.02,
                                      "training.target_kl": 0.05})
    assert (explicit.training.kl_coef, explicit.training.init_kl_coef) == (0.1, 0.02)  # both given: each its own
    refused({"training.kl_coef": 0.02, "training.target_kl": 0.05}, "training.target_kl: the adaptive in-reward KL "
            "controller is verl's")  # the local backend has no adaptive controller


def test_env_docker_manifest_and_prepull_keys(tmp_path):
    config = from_yaml(tmp_path, "env:\n  docker_manifest: datasets/swebench/docker_images_validation.txt\n"
                                 "  prepull_containers: true\n  prepull_max_workers: 4\n  prepull_retries: 1\n"
                                 "  prepull_delay: 0.5\n  prepull_timeout: 60\n")
    # seed names under env load into the images section (config.aliases)
    assert config.images.manifest.endswith("docker_images_validation.txt") and config.images.prepull is True
    assert (config.images.prepull_max_workers, config.images.prepull_retries, config.images.prepull_delay,
            config.images.prepull_timeout) == (4, 1, 0.5, 60)


# --- ROLL (004) keys -------------------------------------------------------------------------------------------

ROLL_YAML = """\
rpc_timeout: 3600
system_envs:
  USE_MODELSCOPE: '1'
track_with: tensorboard
tracker_kwargs:
  log_dir: {logdir}
env:
  format_penalty: -0.15
  max_traj_per_env: -1  # the seed's env.max_traj_per_env, now training.max_traj_per_env
training:
  reward_normalization:
    grouping: inductive
    method: asym_clip
"""


def test_roll_pipeline_keys_load_as_roll_writes_them(tmp_path):
    logdir = tmp_path / "tb"
    config = from_yaml(tmp_path, ROLL_YAML.format(logdir=logdir), **VERL)
    assert config.logging.trackers() == ["tensorboard"]
    assert config.logging.tracker_kwargs == {"tensorboard": {"log_dir": str(logdir)}}
    assert config.env.format_penalty == 0.15  # ROLL's -0.15 reward = our 0.15 subtracted
    assert config.training.max_traj_per_env is None  # -1 = no cap
    assert (config.training.reward_norm_grouping, config.training.reward_norm_method) == ("state", "asym_clip")
    assert config.resources.system_envs == {"USE_MODELSCOPE": "1"}
    assert job_runtime_env(config)["env_vars"]["USE_MODELSCOPE"] == "1"
    assert overrides(config)["trainer.ray_wait_register_center_timeout"] == "3600"
    again = load_run_config(None, {"logging.output_dir": str(tmp_path / "o")})
    assert again.logging.tracker_kwargs == {}


def test_flat_tracker_kwargs_reach_the_tensorboard_writer(tmp_path):
    from graph_planner.telemetry.trackers import make_tracker

    logdir = tmp_path / "tb"
    config = from_yaml(tmp_path, ROLL_YAML.format(logdir=logdir), **{"logging.output_dir": str(tmp_path / "o")})
    tracker = make_tracker(config)
    tracker.log({"reward/mean": 1.0}, 1)
    tracker.finish()
    assert any(p.name.startswith("events.out.tfevents") for p in logdir.iterdir())


def test_flat_tracker_kwargs_with_several_trackers_is_ambiguous():
    refused({"logging.log_backend": "stdout,tensorboard", "logging.tracker_kwargs": {"log_dir": "x"}},
            "is flat (ROLL style) but 2 trackers")


def test_asym_clip_identity_and_reward_clip_on_the_local_backend():
    one_high = torch.tensor([0.0] * 15 + [10.0])  # z of the outlier = 15 / 4 = 3.75
    assert grpo.normalize_rewards(one_high, [0] * 16, "batch", "mean_std").max().item() == pytest.approx(3.75)
    assert grpo.normalize_rewards(one_high, [0] * 16, "batch", "asym_clip").max().item() == pytest.approx(3.0)
    one_low = torch.tensor([1.0] * 15 + [0.0])  # z = -3.75, clipped to -1
    assert grpo.normalize_rewards(one_low, [0] * 16, "batch", "asym_clip").min().item() == pytest.approx(-1.0)
    assert torch.equal(grpo.normalize_rewards(one_high, [0] * 16, "batch", "identity"), one_high)
    config = load_run_config(None, {"training.reward_clip": 1.0, "training.reward_norm_method": "identity",
                                    "training.norm_adv_by_std_in_grpo": False})
    adv = grpo.group_advantages(torch.tensor([0.0, 10.0]), [0, 0], config.training)
    assert adv.tolist() == pytest.approx([-0.5, 0.5])  # 10 clipped to 1 before the group mean
    assert _clipped(10.0, 1.0) == 1.0 and _clipped(-3.0, 1.0) == -1.0 and _clipped(0.4, None) == 0.4


def test_advantage_clip_local_only():
    config = load_run_config(None, {"training.advantage_clip": 0.5, "training.norm_adv_by_std_in_grpo": False,
                                    "training.reward_norm_method": "none"})
    adv = grpo.group_advantages(torch.tensor([0.0, 4.0]), [0, 0], config.training)
    assert adv.tolist() == pytest.approx([-0.5, 0.5])
    refused({**VERL, "training.advantage_clip": 0.5}, "verl 0.9.1 has no advantage clip")


def test_whitening_keys_map_to_group_std_and_batch_reward_norm():
    config = load_run_config(None, {"training.whiten_advantages": False, "training.whiten_rewards": True})
    assert config.training.norm_adv_by_std_in_grpo is False
    assert (config.training.reward_norm_grouping, config.training.reward_norm_method) == ("batch", "mean_std")
    verl = load_run_config(None, {**VERL, "training.whiten_advantages": False})
    assert overrides(verl)["algorithm.norm_adv_by_std_in_grpo"] == "false"


def test_dual_clip_switch_changes_the_loss_for_negative_advantages():
    old = torch.zeros(1, 1)
    new = torch.full((1, 1), math.log(10.0))  # ratio 10, far past 1 + clip
    mask = torch.ones(1, 1)
    adv = torch.tensor([-1.0])
    on = load_run_config(None, {}).training
    off = load_run_config(None, {"training.dual_clip_loss": False}).training
    loss_on, _ = grpo.policy_loss(old, new, adv, mask, on)
    loss_off, _ = grpo.policy_loss(old, new, adv, mask, off)
    assert loss_on.item() == pytest.approx(3.0)  # capped at c = 3 for A < 0
    assert loss_off.item() == pytest.approx(10.0)  # no dual clip: -A * ratio
    got = overrides(load_run_config(None, {**VERL, "training.dual_clip_loss": False}))
    assert float(got["actor_rollout_ref.actor.clip_ratio_c"]) > 1e6


@pytest.mark.parametrize(("tree", "expect"), [
    ({"training.adv_estimator": "rloo"}, {"algorithm.adv_estimator": "rloo"}),
    ({"training.adv_estimator": "gae", "training.lambd": 0.95, "training.gamma": 0.99},
     {"algorithm.adv_estimator": "gae", "algorithm.lam": "0.95", "algorithm.gamma": "0.99",
      "critic.model.path": "toy"}),
    ({"training.ppo_epochs": 2}, {"actor_rollout_ref.actor.ppo_epochs": "2"}),
    ({"training.kl_penalty": "abs"}, {"algorithm.kl_penalty": "abs"}),
    ({"training.critic_warmup": 3}, {"trainer.critic_warmup": "3"}),
])
def test_roll_algorithm_keys_map_to_verl(tree, expect):
    got = overrides(load_run_config(None, {**VERL, **tree}))
    for key, value in expect.items():
        assert got[key] == value, key


@pytest.mark.parametrize(("tree", "needle"), [
    ({"training.kl_penalty": "full"}, "kl_penalty('full') raises NotImplementedError"),
    ({"training.sft_loss_coef": 0.1}, "no SFT term"),
    ({"training.adv_estimator": "reinforce"}, "training.adv_estimator"),
    ({"training.adv_estimator": "rloo"}, "needs training.backend=verl"),
    ({"training.init_kl_coef": 0.01}, "in-reward KL controller is verl's"),
    ({"training.critic_warmup": 2}, "local backend trains no critic"),
    ({"training.kl_horizon": 10}, "kl_horizon needs training.init_kl_coef"),
])
def test_refused_keys_say_why(tree, needle):
    refused(tree, needle)


def test_roll_top_level_key_and_section_key_must_agree(tmp_path):
    with pytest.raises(ConfigError, match=r"track_with \(ROLL\) = \['tensorboard'\]|track_with \(ROLL\)"):
        from_yaml(tmp_path, "track_with: tensorboard\nlogging:\n  track_with: [stdout]\n")


#: The top of seed 004's pipeline YAML (numbers as ROLL's example has them; paths shortened).
ROLL_PIPELINE = """\
exp_name: "agentic_pipeline"
seed: 42
rpc_timeout: 3600
output_dir: {out}
system_envs:
  USE_MODELSCOPE: '1'
track_with: stdout
num_gpus_per_node: 8
max_steps: 1024
save_steps: 10000
eval_steps: 10
resume_from_checkpoint: false
rollout_batch_size: 64
prompt_length: 2048
response_length: 4096
num_return_sequences_in_group: 8
ppo_epochs: 1
max_grad_norm: 1.0
adv_estimator: grpo
whiten_advantages: true
init_kl_coef: 0.2
kl_horizon: 10000
reward_clip: 10
reward_normalization:
  grouping: traj_group_id
  method: mean_std
train_env_manager:
  env_groups: 8
  group_size: 8
  max_traj_per_env: -1
  format_penalty: -0.15
training:
  backend: verl
  ppo_mini_batch_size: 64
"""


def test_roll_pipeline_yaml_top_loads_onto_our_sections(tmp_path):
    config = from_yaml(tmp_path, ROLL_PIPELINE.format(out=tmp_path / "o"))
    t = config.training
    assert (config.experiment.name, config.experiment.seed, config.resources.num_gpus) == ("agentic_pipeline", 42, 8)
    assert (t.total_steps, t.train_batch_size, t.max_prompt_length, t.max_response_length, t.group_size) == (
        1024, 64, 2048, 4096, 8)
    assert (config.logging.save_interval, config.logging.eval_interval, t.resume_from) == (10000, 10, None)
    assert (t.clip_grad_norm, t.init_kl_coef, t.kl_horizon, t.reward_clip, t.env_groups) == (1.0, 0.2, 10000, 10, 8)
    assert t.reward_norm_grouping == "group" and t.max_traj_per_env is None and config.env.format_penalty == 0.15
    assert config.logging.output_dir == str(tmp_path / "o")
    got = overrides(config.model_copy(update={"resources": config.resources.model_copy(
        update={"num_gpus": 2, "ray_num_gpus": 2})}))
    assert got["algorithm.kl_ctrl.kl_coef"] == "0.2" and got["data.train_batch_size"] == "64"
    with pytest.raises(ConfigError, match="train_env_manager: \\['tags'\\] have no counterpart"):
        from_yaml(tmp_path, "train_env_manager:\n  tags: [SimpleSokoban]\n")
    assert load_run_config(None, {"resume_from_checkpoint": True}).training.resume_from == "auto"


def test_resolved_config_with_roll_keys_reloads_to_the_same_config(tmp_path):
    config = from_yaml(tmp_path, ROLL_YAML.format(logdir=tmp_path / "tb") + "  clip_coef: 0.15\n",
                       **{"logging.output_dir": str(tmp_path / "o")})
    from graph_planner.config.loader import config_to_dict, write_resolved_config

    path = write_resolved_config(config)
    again = load_run_config(path, yaml_only=True)
    assert config_to_dict(again) == config_to_dict(config)
    assert yaml.safe_load(path.read_text())["env"]["format_penalty"] == 0.15


def test_cgm_model_path_switches_the_cgm_on_unless_a_backend_is_chosen():
    assert load_run_config(None, {"paths.cgm_model": "models/CodeFuse-CGM"}).backends.cgm_backend == "hf"
    assert load_run_config(None, {}).backends.cgm_backend == "none"
    chosen = load_run_config(None, {"paths.cgm_model": "m", "backends.cgm_backend": "none"})
    assert chosen.backends.cgm_backend == "none"  # an explicit choice wins
