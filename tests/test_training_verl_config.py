"""Run config -> verl main_ppo Hydra overrides: golden files for the GPU presets, composed against verl's schema.

Regenerate the golden files after an intended change: ``.venv/bin/python tests/test_training_verl_config.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

from graph_planner.config.loader import load_run_config
from graph_planner.config.paths import run_paths
from graph_planner.training.verl.config import (
    ACTOR_MIXED_PRECISION,
    REF_MIXED_PRECISION,
    VerlDataPaths,
    build_verl_overrides,
    default_data_paths,
    hydra_value,
    verl_config_dir,
    verl_gpu_layout,
    verl_schema_keys,
)

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
PRESETS = ["planner_8g", "planner_cgm_8g", "gp_full_73b14b_16g"]


def preset_overrides(name: str, **cli) -> list[str]:
    config = load_run_config(ROOT / "configs" / "experiments" / f"{name}.yaml", cli)
    run_dir = run_paths(config).run_dir
    return build_verl_overrides(config, default_data_paths(config), run_dir, run_dir / "verl" / "agent_loops.yaml")


def compose_verl(overrides: list[str]):
    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def as_dict(overrides: list[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in overrides)


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_match_golden_files(preset):
    golden = (GOLDEN / f"verl_overrides_{preset}.txt").read_text(encoding="utf-8").splitlines()
    assert preset_overrides(preset) == golden


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_overrides_compose_against_verl_schema(preset):
    overrides = preset_overrides(preset)
    keys = verl_schema_keys()
    # nothing needs a '+' but the FSDP engine's mixed_precision, a field verl's YAML leaves out
    assert [o.split("=", 1)[0] for o in overrides if o.split("=", 1)[0] not in keys] == [
        f"+{ACTOR_MIXED_PRECISION}", f"+{REF_MIXED_PRECISION}"]
    cfg = compose_verl(overrides)
    config = load_run_config(ROOT / "configs" / "experiments" / f"{preset}.yaml")
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.actor_rollout_ref.rollout.n == config.training.group_size
    assert cfg.data.train_batch_size == config.training.train_batch_size
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == config.training.ppo_mini_batch_size
    assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == config.parallel.tensor_parallel_planner
    assert cfg.actor_rollout_ref.actor.use_kl_loss is (config.training.kl_coef > 0)
    assert cfg.trainer.default_local_dir == f"outputs/{config.run_name}/checkpoints"
    assert list(cfg.trainer.logger) == ["console", "file"]  # the job's bridge feeds the run's trackers


def test_gpu_split_with_a_colocated_cgm_engine():
    gpus = {name: verl_gpu_layout(load_run_config(ROOT / "configs" / "experiments" / f"{name}.yaml"))
            for name in PRESETS}
    assert (gpus["planner_8g"].nnodes, gpus["planner_8g"].n_gpus_per_node) == (1, 4)  # CGM TP 4 keeps 4
    assert (gpus["planner_cgm_8g"].nnodes, gpus["planner_cgm_8g"].n_gpus_per_node) == (1, 4)  # device_map_planner
    assert (gpus["gp_full_73b14b_16g"].nnodes, gpus["gp_full_73b14b_16g"].n_gpus_per_node) == (1, 8)  # [0..7]
    odd = load_run_config(None, {"training.backend": "verl", "resources.num_gpus": 8, "resources.num_nodes": 2,
                                 "backends.cgm_backend": "cgm", "parallel.tensor_parallel_cgm": 4})
    with pytest.raises(ValueError, match="trainer.nnodes and trainer.n_gpus_per_node"):
        verl_gpu_layout(odd)
    explicit = odd.model_copy(update={"verl_overrides": {"trainer.nnodes": 2, "trainer.n_gpus_per_node": 4}})
    assert verl_gpu_layout(explicit).total == 8
    bad_tp = load_run_config(None, {"resources.num_gpus": 6, "parallel.tensor_parallel_planner": 4})
    with pytest.raises(ValueError, match="multiple of parallel.tensor_parallel_planner"):
        verl_gpu_layout(bad_tp)


def test_passthrough_is_flattened_last_and_plus_prefixed_when_new():
    overrides = preset_overrides("planner_8g", verl_overrides={
        "actor_rollout_ref": {"rollout": {"gpu_memory_utilization": 0.6,
                                          "engine_kwargs": {"vllm": {"max_num_seqs": 64}}}},
        "data.train_batch_size": 64,
        "+ray_kwargs.ray_init.address": "auto",
    })
    tail = overrides[-4:]
    assert tail == ["actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
                    "+actor_rollout_ref.rollout.engine_kwargs.vllm.max_num_seqs=64",
                    "data.train_batch_size=64", "+ray_kwargs.ray_init.address=auto"]
    assert sum(o.startswith("data.train_batch_size=") for o in overrides) == 1  # the passthrough replaced it
    cfg = compose_verl(overrides)
    assert cfg.data.train_batch_size == 64
    assert cfg.actor_rollout_ref.rollout.engine_kwargs.vllm.max_num_seqs == 64
    assert cfg.ray_kwargs.ray_init.address == "auto"


def test_resume_modes_loggers_and_kl_switch():
    base = {"training.backend": "verl", "resources.num_gpus": 2, "parallel.tensor_parallel_cgm": 0}
    paths = VerlDataPaths("/d/train.parquet")

    def translate(**extra):
        return as_dict(build_verl_overrides(load_run_config(None, {**base, **extra}), paths, "/r"))

    fresh = translate()
    assert fresh["trainer.resume_mode"] == "disable" and "trainer.resume_from_path" not in fresh
    assert translate(**{"training.resume_from": "auto"})["trainer.resume_mode"] == "auto"
    by_path = translate(**{"training.resume_from": "/ckpt/global_step_20"})
    assert (by_path["trainer.resume_mode"], by_path["trainer.resume_from_path"]) == ("resume_path",
                                                                                     "/ckpt/global_step_20")
    assert fresh["actor_rollout_ref.actor.use_kl_loss"] == "false" and "actor_rollout_ref.actor.kl_loss_coef" \
        not in fresh
    assert fresh["data.val_files"] == "/d/train.parquet"  # no val split: validate on train
    assert translate(**{"logging.log_backend": "stdout,jsonl,tensorboard"})["trainer.logger"] == "[console,file]"
    kl = translate(**{"training.kl_coef": 0.01, "training.kl_loss_type": "k3"})
    assert (kl["actor_rollout_ref.actor.kl_loss_coef"], kl["actor_rollout_ref.actor.kl_loss_type"]) == ("0.01", "k3")
    assert translate(**{"logging.eval_interval": 0})["trainer.test_freq"] == "-1"


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_fsdp_engine_computes_in_training_precision(precision):
    """verl's FSDP engine ignores fsdp_config.dtype and computes in bf16 unless fsdp_config.mixed_precision says
    otherwise: an fp32 run (the CPU learning config) must reach the engine as fp32, actor and reference alike."""
    from verl.utils.config import omega_conf_to_dataclass

    config = load_run_config(ROOT / "configs" / "experiments" / "local_verl_learning.yaml",
                             {"training.precision": precision})
    cfg = compose_verl(build_verl_overrides(config, VerlDataPaths("/d/train.parquet"), "/r"))
    for role in ("actor", "ref"):
        engine = omega_conf_to_dataclass(cfg.actor_rollout_ref[role].fsdp_config)
        assert engine.mixed_precision["param_dtype"] == precision
        assert engine.mixed_precision["reduce_dtype"] == "fp32"
    # a passthrough field of it is set inside the dict, not appended as a second key
    tweaked = config.model_copy(update={"verl_overrides": {
        "actor_rollout_ref": {"actor": {"fsdp_config": {"mixed_precision": {"reduce_dtype": "bf16"}}}}}})
    cfg = compose_verl(build_verl_overrides(tweaked, VerlDataPaths("/d/train.parquet"), "/r"))
    assert dict(cfg.actor_rollout_ref.actor.fsdp_config.mixed_precision) == {
        "param_dtype": precision, "reduce_dtype": "bf16", "buffer_dtype": "fp32"}


def test_one_gpu_keeps_grpo_groups_whole_in_mini_batches():
    """verl's balance_batch sorts a one-rank batch by length, which splits each GRPO group over mini-batches; the
    local engine's mini-batches hold whole groups. Off on one GPU (nothing to balance), on with more."""
    one = load_run_config(ROOT / "configs" / "experiments" / "local_verl_learning.yaml")
    assert as_dict(build_verl_overrides(one, VerlDataPaths("/d/t.parquet"), "/r"))["trainer.balance_batch"] == "false"
    assert as_dict(preset_overrides("planner_8g"))["trainer.balance_batch"] == "true"


@pytest.mark.parametrize("value", ["/data/x.parquet", "Qwen/Qwen3-14B", "~/models/m", "true", "null", "1e-6", "42",
                                   "a b", "it's", "x=y", "[a]", 1e-6, 3, True, None, ["console", "wandb"], "",
                                   "http://127.0.0.1:30001/generate"])
def test_hydra_values_round_trip_through_hydras_parser(value):
    parsed = OverridesParser.create().parse_override(f"k={hydra_value(value)}").value()
    assert parsed == value


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_batching_passes_verls_own_config_check(preset):
    """verl's validate_config (run by main_ppo before training) accepts each preset's batch layout; planner_8g's
    grad_accum_steps 8 (seed 000 section 2) = 8 fixed micro-batches per GPU per optimiser step."""
    from verl.utils.config import validate_config

    cfg = compose_verl(preset_overrides(preset))
    validate_config(cfg, use_reference_policy=bool(cfg.actor_rollout_ref.actor.use_kl_loss), use_critic=False)
    if preset == "planner_8g":
        actor = cfg.actor_rollout_ref.actor
        per_gpu = actor.ppo_mini_batch_size * cfg.actor_rollout_ref.rollout.n // (cfg.trainer.n_gpus_per_node *
                                                                                   cfg.trainer.nnodes)
        assert actor.use_dynamic_bsz is False and per_gpu // actor.ppo_micro_batch_size_per_gpu == 8


def test_grad_accum_that_does_not_divide_the_mini_batch_is_refused():
    with pytest.raises(ValueError, match=r"grad_accum_steps \(3\) must divide"):
        preset_overrides("planner_8g", **{"training.grad_accum_steps": 3})


def _regenerate() -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for preset in PRESETS:
        (GOLDEN / f"verl_overrides_{preset}.txt").write_text("\n".join(preset_overrides(preset)) + "\n",
                                                             encoding="utf-8")
        print(f"wrote {GOLDEN / f'verl_overrides_{preset}.txt'}")


if __name__ == "__main__":
    _regenerate()
