"""Translate the run config into ``python -m verl.trainer.main_ppo`` Hydra overrides (verl 0.9.1 key names).

Every key we set exists in verl's schema (tests compose the real config with Hydra); ``verl_overrides`` comes
last and wins, its nested dicts flattened to dotted keys and given a ``+`` when the key is new to verl's schema.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from graph_planner.config.paths import run_paths
from graph_planner.config.schema import RunConfig

log = logging.getLogger(__name__)

#: Name our agent loop is registered under in the agent-loop YAML (the verl-side loop is wired by the lead).
AGENT_LOOP_NAME = "graph_planner"
#: verl's own loggers: ``console`` (the job log) and ``file`` (one JSON line a step), which the job's telemetry
#: bridge forwards into the run's trackers (:mod:`graph_planner.training.verl.telemetry`): one writer per tracker.
VERL_LOGGERS = ["console", "file"]
_SAFE = re.compile(r"^[A-Za-z_/.][A-Za-z0-9_./:\-]*$")
_RESERVED = {"true", "false", "null", "none", "nan", "inf", "-inf"}


@dataclass(frozen=True)
class VerlDataPaths:
    """The registered verl parquet files (``graph_planner.data.registry`` writes them)."""

    train: str
    val: str | None = None


def default_data_paths(config: RunConfig) -> VerlDataPaths:
    """Where `gp data register` puts the parquet files: ``<data.output_dir>/registry/<dataset_name>/<split>.parquet``."""
    paths = run_paths(config)
    return VerlDataPaths(train=str(paths.parquet("train")), val=str(paths.parquet("val")))


#: The val file taken when none is given: this name beside the train file (the registry's layout).
DEFAULT_VAL_NAME = "val.parquet"


def verl_data_files(config: RunConfig, train_files: str | None = None, val_files: str | None = None,
                    registry: str | Path | None = None) -> VerlDataPaths:
    """The one val-file rule of the verl job (``gp train``, the Prefect train task and the job's entry alike).

    train: ``train_files``, else ``<registry>/<dataset_name>/train.parquet`` (default registry
    ``<data.output_dir>/registry``). val: ``val_files`` when given, and then it must exist (FileNotFoundError
    naming it: a typo never silently trains without validation); else ``val.parquet`` beside the train file when
    that exists; else none, and the job trains without a validation set (logged)."""
    from graph_planner.config.paths import parquet_path

    if train_files:
        train = Path(train_files)
    elif registry is not None:
        train = parquet_path(registry, config.data.dataset_name, "train")
    else:
        train = Path(default_data_paths(config).train)
    if val_files:
        if not Path(val_files).is_file():
            raise FileNotFoundError(f"val file not found: {val_files} (--val-files); give an existing parquet, or "
                                    f"leave it out to use {DEFAULT_VAL_NAME} beside the train file when there is one")
        return VerlDataPaths(train=str(train), val=str(val_files))
    beside = train.parent / DEFAULT_VAL_NAME
    if beside.is_file() and beside != train:
        return VerlDataPaths(train=str(train), val=str(beside))
    log.info("no val file (%s not found): the verl job trains without a validation set", beside)
    return VerlDataPaths(train=str(train), val=None)


@dataclass(frozen=True)
class GpuLayout:
    """GPUs the verl trainer gets (a co-located CGM engine keeps ``tensor_parallel_cgm`` of them)."""

    nnodes: int
    n_gpus_per_node: int

    @property
    def total(self) -> int:
        return self.nnodes * self.n_gpus_per_node


def verl_gpu_layout(config: RunConfig) -> GpuLayout:
    """Planner GPUs = all GPUs minus the local CGM engine's (``parallel.tensor_parallel_cgm``; 0 = none).

    verl's resource pool is symmetric (``n_gpus_per_node`` on each of ``nnodes``), so the CGM engine must take
    whole nodes, or part of the only node; other splits need ``trainer.nnodes`` / ``trainer.n_gpus_per_node``
    set explicitly in ``verl_overrides``.
    """
    r, p = config.resources, config.parallel
    explicit = {k: config.verl_overrides.get(f"trainer.{k}") for k in ("nnodes", "n_gpus_per_node")}
    if all(v is not None for v in explicit.values()):
        return GpuLayout(int(explicit["nnodes"]), int(explicit["n_gpus_per_node"]))
    pinned = config.backends.gpus("planner")
    cgm = p.tensor_parallel_cgm if config.backends.cgm_backend == "cgm" else 0
    if pinned is not None:  # backends.device_map_planner: [0,1,2,3] -> the trainer gets exactly those GPUs
        n = len(pinned)
        if n <= r.num_gpus:
            layout = GpuLayout(1, n)
        elif r.num_gpus > 0 and n % r.num_gpus == 0:
            layout = GpuLayout(n // r.num_gpus, r.num_gpus)
        else:
            raise ValueError(f"backends.device_map_planner pins {n} GPUs: verl needs them on one node or as whole "
                             f"nodes of resources.num_gpus ({r.num_gpus})")
    elif cgm == 0:
        layout = GpuLayout(r.num_nodes, r.num_gpus)
    elif r.num_gpus > 0 and cgm % r.num_gpus == 0 and cgm // r.num_gpus < r.num_nodes:
        layout = GpuLayout(r.num_nodes - cgm // r.num_gpus, r.num_gpus)
    elif r.num_nodes == 1 and cgm < r.num_gpus:
        layout = GpuLayout(1, r.num_gpus - cgm)
    else:
        raise ValueError(
            f"cannot split {r.num_nodes} node(s) x {r.num_gpus} GPU(s) between the CGM engine "
            f"(parallel.tensor_parallel_cgm={cgm}) and the verl trainer: set verl_overrides "
            "trainer.nnodes and trainer.n_gpus_per_node to the planner's share")
    tp = p.tensor_parallel_planner
    if layout.total < tp or layout.total % tp:
        raise ValueError(f"verl trainer GPUs ({layout.nnodes} x {layout.n_gpus_per_node} = {layout.total}) must be "
                         f"a positive multiple of parallel.tensor_parallel_planner ({tp})")
    return layout


def _resume(config: RunConfig) -> dict[str, Any]:
    resume = config.training.resume_from
    if resume is None:
        return {"trainer.resume_mode": "disable"}
    if resume == "auto":
        return {"trainer.resume_mode": "auto"}
    return {"trainer.resume_mode": "resume_path", "trainer.resume_from_path": resume}


def base_overrides(config: RunConfig, data_paths: VerlDataPaths, run_dir: str | Path,
                   agent_loop_config_path: str | Path | None = None) -> dict[str, Any]:
    """The translated keys, before ``verl_overrides`` (dict in emission order)."""
    t, s, env = config.training, config.planner_sampling, config.env
    if t.reward_norm_grouping != "group" or t.reward_norm_method != "mean_std":
        log.warning("training.reward_norm_grouping/method (%s/%s) apply to the local backend only; verl's GRPO "
                    "normalises within each group", t.reward_norm_grouping, t.reward_norm_method)
    layout = verl_gpu_layout(config)
    token_budget = 2 * (t.max_prompt_length + t.max_response_length)  # verl's advice for dynamic batch size
    dtype = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[t.precision]
    out: dict[str, Any] = {
        "algorithm.adv_estimator": t.adv_estimator,
        "algorithm.norm_adv_by_std_in_grpo": t.norm_adv_by_std_in_grpo,
        "algorithm.use_kl_in_reward": False,
        "data.train_files": data_paths.train,
        "data.val_files": data_paths.val or data_paths.train,
        "data.train_batch_size": t.train_batch_size,
        "data.max_prompt_length": t.max_prompt_length,
        "data.max_response_length": t.max_response_length,
        "data.return_raw_chat": True,
        "data.filter_overlong_prompts": True,
        "data.seed": config.experiment.seed,
        "actor_rollout_ref.model.path": config.paths.planner_model,
        "actor_rollout_ref.model.enable_gradient_checkpointing": t.gradient_checkpointing,
        "actor_rollout_ref.actor.ppo_mini_batch_size": t.ppo_mini_batch_size,
        **micro_batches(config, layout),
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": token_budget,
        "actor_rollout_ref.actor.optim.lr": t.lr,
        "actor_rollout_ref.actor.optim.weight_decay": t.weight_decay,
        "actor_rollout_ref.actor.optim.lr_warmup_steps": t.warmup_steps if t.warmup_steps > 0 else -1,
        "actor_rollout_ref.actor.optim.clip_grad": t.clip_grad_norm,
        "actor_rollout_ref.actor.clip_ratio_low": t.clip_ratio_low,
        "actor_rollout_ref.actor.clip_ratio_high": t.clip_ratio_high,
        "actor_rollout_ref.actor.loss_agg_mode": t.loss_agg_mode,
        "actor_rollout_ref.actor.entropy_coeff": t.entropy_coef,
        "actor_rollout_ref.actor.ppo_epochs": t.ppo_epochs,
        "actor_rollout_ref.actor.clip_ratio_c": t.effective_clip_ratio_c(),
        "actor_rollout_ref.actor.use_kl_loss": t.kl_coef > 0,
        "actor_rollout_ref.actor.fsdp_config.dtype": dtype,
        "actor_rollout_ref.ref.fsdp_config.dtype": dtype,
        # what verl's FSDP engine computes in (fsdp_config.dtype is not read there: without this, bf16)
        f"+{ACTOR_MIXED_PRECISION}": mixed_precision(t.precision),
        f"+{REF_MIXED_PRECISION}": mixed_precision(t.precision),
        "actor_rollout_ref.rollout.name": t.rollout_engine,
        "actor_rollout_ref.rollout.n": t.group_size,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": config.parallel.tensor_parallel_planner,
        "actor_rollout_ref.rollout.temperature": s.temperature,
        "actor_rollout_ref.rollout.top_p": s.top_p,
        "actor_rollout_ref.rollout.top_k": s.top_k if s.top_k > 0 else -1,
        "actor_rollout_ref.rollout.multi_turn.enable": True,
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": env.max_steps,
        "actor_rollout_ref.rollout.agent.num_workers": config.parallel.rollout_workers,
        "actor_rollout_ref.rollout.agent.default_agent_loop": AGENT_LOOP_NAME,
        "trainer.total_epochs": t.total_epochs,
        "trainer.total_training_steps": t.total_steps,
        "trainer.project_name": config.logging.wandb.project,
        "trainer.experiment_name": config.run_name,
        "trainer.logger": VERL_LOGGERS,
        # one GPU: verl's length balancing only reorders the batch, splitting each GRPO group over mini-batches
        "trainer.balance_batch": layout.total > 1,
        "trainer.nnodes": layout.nnodes,
        "trainer.n_gpus_per_node": layout.n_gpus_per_node,
        "trainer.save_freq": config.logging.save_interval,
        "trainer.test_freq": config.logging.eval_interval or -1,
        "trainer.val_before_train": config.logging.eval_interval > 0,
        "trainer.default_local_dir": str(Path(run_dir) / "checkpoints"),
        **_resume(config),
    }
    if t.kl_coef > 0:
        out["actor_rollout_ref.actor.kl_loss_coef"] = t.kl_coef
        out["actor_rollout_ref.actor.kl_loss_type"] = t.kl_loss_type
    out.update(algorithm_overrides(config))
    if config.paths.planner_tokenizer:
        out["actor_rollout_ref.model.tokenizer_path"] = config.paths.planner_tokenizer
    if agent_loop_config_path is not None:
        out["actor_rollout_ref.rollout.agent.agent_loop_config_path"] = str(agent_loop_config_path)
    return out


#: FSDPEngineConfig fields verl's Hydra YAML leaves out (so they take a ``+``): the FSDP engine's compute precision.
ACTOR_MIXED_PRECISION = "actor_rollout_ref.actor.fsdp_config.mixed_precision"
REF_MIXED_PRECISION = "actor_rollout_ref.ref.fsdp_config.mixed_precision"


def mixed_precision(precision: str) -> dict[str, str]:
    """``training.precision`` as verl's ``fsdp_config.mixed_precision``: the dtype the FSDP engine's forward and
    backward run in (FSDP2 ``MixedPrecisionPolicy.param_dtype`` and the autocast dtype); gradients are reduced and
    buffers kept in fp32. verl 0.9.1 reads only this for its FSDP engine and falls back to bf16 when it is unset,
    whatever ``fsdp_config.dtype`` says: an fp32 run would train in bf16 (the local backend's fp32 does not)."""
    return {"param_dtype": precision, "reduce_dtype": "fp32", "buffer_dtype": "fp32"}


def micro_batches(config: RunConfig, layout: GpuLayout) -> dict[str, Any]:
    """``training.grad_accum_steps``: 1 = verl's dynamic batch size (a token budget decides the micro-batches);
    N > 1 = each GPU's share of a mini-batch (``ppo_mini_batch_size x group_size / GPUs`` samples, as verl splits
    it) goes through in N fixed micro-batches, i.e. N accumulated backward passes per optimiser step. Log-prob
    passes stay dynamic."""
    t = config.training
    if t.grad_accum_steps <= 1:
        return {"actor_rollout_ref.actor.use_dynamic_bsz": True}
    per_gpu, rest = divmod(t.ppo_mini_batch_size * t.group_size, layout.total)
    if rest or per_gpu % t.grad_accum_steps or per_gpu < t.grad_accum_steps:
        raise ValueError(
            f"training.grad_accum_steps ({t.grad_accum_steps}) must divide each GPU's mini-batch share: "
            f"ppo_mini_batch_size ({t.ppo_mini_batch_size}) x group_size ({t.group_size}) / {layout.total} GPUs "
            f"= {t.ppo_mini_batch_size * t.group_size / layout.total:g} samples; change one of them, or set "
            "grad_accum_steps 1 (verl's dynamic batch size)")
    micro = per_gpu // t.grad_accum_steps
    out: dict[str, Any] = {
        "actor_rollout_ref.actor.use_dynamic_bsz": False,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": micro,
        # verl asks for log-prob micro sizes whenever the actor's batching is fixed; the passes stay dynamic
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": True,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": True,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": micro,
    }
    if t.adv_estimator == "gae":
        out["critic.ppo_micro_batch_size_per_gpu"] = micro
    return out


def algorithm_overrides(config: RunConfig) -> dict[str, Any]:
    """The seed / ROLL algorithm keys that are set (``graph_planner.config.algorithm``) as verl keys."""
    t = config.training
    out: dict[str, Any] = {}
    if t.gamma is not None:
        out["algorithm.gamma"] = t.gamma
    if t.lambd is not None:
        out["algorithm.lam"] = t.lambd
    if t.kl_penalty is not None:
        out["algorithm.kl_penalty"] = t.kl_penalty
    if t.init_kl_coef is not None:  # ROLL's in-reward KL = verl's KL controller
        out["algorithm.use_kl_in_reward"] = True
        out["algorithm.kl_ctrl.type"] = "adaptive" if t.target_kl is not None else "fixed"
        out["algorithm.kl_ctrl.kl_coef"] = t.init_kl_coef
        if t.kl_horizon is not None:
            out["algorithm.kl_ctrl.horizon"] = t.kl_horizon
        if t.target_kl is not None:
            out["algorithm.kl_ctrl.target_kl"] = t.target_kl
    if t.critic_warmup > 0:
        out["trainer.critic_warmup"] = t.critic_warmup
    if t.adv_estimator == "gae":  # verl trains a critic; start it from the planner checkpoint
        out["critic.model.path"] = config.paths.planner_model
    if config.resources.rpc_timeout is not None:
        out["trainer.ray_wait_register_center_timeout"] = int(config.resources.rpc_timeout)
    return out


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``); lists and scalars are leaves."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, dotted))
        else:
            out[dotted] = value
    return out


def verl_config_dir() -> Path:
    """verl's Hydra config dir inside the installed wheel (found without importing verl)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("verl is not installed: `pip install -e '.[train]'` (verl==0.9.1) for the verl backend")
    return Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config"


@lru_cache(maxsize=1)
def verl_schema_keys() -> frozenset[str]:
    """Every dotted key of verl's resolved trainer config (``_generated_ppo_trainer.yaml`` in the wheel)."""
    path = verl_config_dir() / "_generated_ppo_trainer.yaml"
    tree = yaml.safe_load(path.read_text(encoding="utf-8"))
    keys: set[str] = set()

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                dotted = f"{prefix}.{k}" if prefix else str(k)
                keys.add(dotted)
                walk(v, dotted)

    walk(tree, "")
    return frozenset(keys)


def _passthrough_key(key: str, schema: frozenset[str]) -> str:
    if key.startswith(("+", "~")):
        return key
    return key if key in schema else f"+{key}"


def hydra_value(value: Any) -> str:
    """A Python value as Hydra override text (strings quoted unless unambiguous)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if _SAFE.match(text) and text.lower() not in _RESERVED:
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def build_verl_overrides(config: RunConfig, data_paths: VerlDataPaths, run_dir: str | Path,
                         agent_loop_config_path: str | Path | None = None,
                         platform_overrides: Mapping[str, Any] | None = None) -> list[str]:
    """``key=value`` strings for ``python -m verl.trainer.main_ppo``: the translated keys, then the platform's
    (the CPU path's, :func:`graph_planner.training.verl.cpu.cpu_hydra_overrides`), then ``verl_overrides`` (it
    wins)."""
    merged = base_overrides(config, data_paths, run_dir, agent_loop_config_path)
    schema = verl_schema_keys()
    for key, value in {**(platform_overrides or {}), **flatten(config.verl_overrides)}.items():
        bare = key.lstrip("+~")
        parent = next((k for k, v in merged.items() if isinstance(v, dict) and bare.startswith(k.lstrip("+") + ".")),
                      None)
        if parent is not None:  # a field of a dict value we emit (mixed_precision.param_dtype): set it in there
            merged[parent] = {**merged[parent], bare[len(parent.lstrip("+")) + 1:]: value}
            continue
        merged.pop(bare, None)
        merged.pop(f"+{bare}", None)
        merged[_passthrough_key(key, schema)] = value
    return [f"{key}={hydra_value(value)}" for key, value in merged.items()]

