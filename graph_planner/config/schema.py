"""Pydantic schema of the one run configuration (seed 000 sections), shared by every `gp` command and flow.

Every field carries its default and a one-line description; unknown keys are errors (``extra="forbid"``),
penalties are non-negative numbers that the environment *subtracts*.

Each section also declares what its values change (``affects``: data / manifest / register / train / eval), the
single source of the Prefect cache keys (:mod:`graph_planner.config.cache_keys`): a field nobody declared fails
the test suite instead of silently reusing a stale cached result. Seed key names that moved to another section
still load (:mod:`graph_planner.config.aliases`).
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from graph_planner.config.algorithm import GROUP_ESTIMATORS, AlgorithmKeys, backend_problems
from graph_planner.config.aliases import move_seed_keys
from graph_planner.config.roll import move_roll_keys
from graph_planner.config.sandbox_names import SandboxName, unalias_sandbox_name

#: The cached steps a config value can change: prepared tasks, image manifest, registered parquet, trained
#: weights, eval results.
Stage = Literal["data", "manifest", "register", "train", "eval"]
TRAIN_EVAL: frozenset[Stage] = frozenset({"train", "eval"})


class Section(BaseModel):
    """Base for every config section: unknown keys are rejected, values re-validated on assignment.

    Cache declaration (each section states it itself, tests/test_config_cache_keys.py checks): ``affects`` = the
    stages every field of the section changes, or ``field_affects`` = the stages of each field by name (a field
    there overrides ``affects``); ``file_fields`` = fields naming local files whose bytes count too.
    """

    # inf / nan make a run meaningless (lr=inf turns every weight into nan): refused in every float of every section
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
    affects: ClassVar[frozenset[Stage] | None] = None
    field_affects: ClassVar[dict[str, frozenset[Stage]]] = {}
    file_fields: ClassVar[frozenset[str]] = frozenset()


class ExperimentConfig(Section):
    affects = TRAIN_EVAL
    name: str = Field("graph-planner", description="Experiment name; also the default run name.")
    run_name: str | None = Field(None, description="Run directory name under logging.output_dir (default: "
                                 "<name>-<UTC timestamp>, a fresh dir per run; a named run's dir is reused).")
    seed: int = Field(42, description="Global random seed (data order, sampling, model init).")
    agent: Literal["planner", "cgm"] = Field(
        "planner", description="planner = planner + synthesiser; cgm = the synthesiser alone on the task."
    )
    notes: str = Field("", description="Free text stored with the run.")


class PathsConfig(Section):
    field_affects = {"data_dir": frozenset({"train"}), "dataset_train": frozenset({"train"}),
                     "dataset_val": frozenset({"train"}), "dataset_eval": frozenset({"eval"}),
                     "planner_model": TRAIN_EVAL, "planner_tokenizer": TRAIN_EVAL, "cgm_model": TRAIN_EVAL,
                     "cgm_tokenizer": TRAIN_EVAL, "cache_dir": TRAIN_EVAL}
    file_fields = frozenset({"dataset_train", "dataset_val", "dataset_eval", "planner_model", "planner_tokenizer",
                             "cgm_model"})
    data_dir: str = Field("prepared/sample", description="Prepared dataset directory (train.jsonl, val.jsonl, ...).")
    dataset_train: str | None = Field(None, description="Training JSONL (default: <data_dir>/train.jsonl).")
    dataset_val: str | None = Field(None, description="Validation JSONL (default: <data_dir>/val.jsonl).")
    dataset_eval: str | None = Field(None, description="Evaluation JSONL or prepared dir used by `gp eval`.")
    planner_model: str = Field("toy", description="Planner checkpoint path / HF id, or 'toy' for the built-in toy LM.")
    planner_tokenizer: str | None = Field(None, description="Tokenizer path (default: planner_model).")
    cgm_model: str | None = Field(None, description="CGM / synthesiser checkpoint path or served model name.")
    cgm_tokenizer: str | None = Field(None, description="CGM tokenizer path (default: cgm_model).")
    cache_dir: str = Field(".cache/graph_planner", description="Built artefacts reused across runs (toy checkpoint).")


class BackendsConfig(Section):
    affects = TRAIN_EVAL
    planner_backend: Literal["toy", "hf", "openai", "rule"] = Field(
        "toy", description="Where planner turns come from: toy LM, local HF model, OpenAI-compatible HTTP, rules."
    )
    planner_endpoint: str | None = Field(None, description="Base URL of an OpenAI-compatible server (planner).")
    planner_api_key_env: str = Field("PLANNER_API_KEY", description="Env var holding the planner API key.")
    cgm_backend: Literal["cgm", "llm", "hf", "none", "gold", "oracle"] = Field(
        "none", description="Patch synthesiser: CGM HTTP, OpenAI-compatible LLM, local HF, none; diagnostics: gold "
        "(the gold patch) and oracle (the gold patch only when memory M holds the code it changes)."
    )
    cgm_endpoint: str | None = Field(None, description="URL of the CGM /generate service or LLM base URL.")
    cgm_api_key_env: str = Field("CGM_API_KEY", description="Env var holding the synthesiser API key.")
    sandbox: SandboxName = Field(
        "local", description="Sandbox backend of tasks that name none; a failing backend is an error, never a "
                             "silent fallback."
    )
    sandbox_override: SandboxName | None = Field(
        None, description="Set by --sandbox: every task runs on this backend, whatever its own `backend` says "
                          "(precedence: CLI > task > backends.sandbox)."
    )
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field("float32", description="Model dtype.")

    _sandbox_alias = field_validator("sandbox", "sandbox_override", mode="before")(unalias_sandbox_name)
    device_map_planner: str | list[int] = Field(
        "auto", description="HF device map for the planner, or a GPU list ([0,1,2,3]) pinning it to those GPUs.")
    device_map_cgm: str | list[int] = Field(
        "auto", description="HF device map for the synthesiser, or a GPU list ([4,5,6,7]) pinning it to those GPUs.")
    max_gpu_memory: str | None = Field(None, description="Per-GPU memory cap passed to HF (e.g. '70GiB').")

    @field_validator("device_map_planner", "device_map_cgm")
    @classmethod
    def _gpu_list(cls, value: str | list[int]) -> str | list[int]:
        if isinstance(value, list):
            if not value or any(i < 0 for i in value) or len(set(value)) != len(value):
                raise ValueError(f"a GPU list must be non-empty, non-negative and without repeats, got {value}")
        return value

    def gpus(self, which: Literal["planner", "cgm"]) -> list[int] | None:
        """The pinned GPU indices of the planner / synthesiser, or None for an HF device-map string."""
        value = self.device_map_planner if which == "planner" else self.device_map_cgm
        return list(value) if isinstance(value, list) else None


class SamplingConfig(Section):
    affects = TRAIN_EVAL
    temperature: float = Field(0.7, ge=0.0, description="Sampling temperature (0 = greedy).")
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    top_k: int = Field(0, ge=0, description="Top-k cut (0 = off).")
    max_new_tokens: int = Field(512, ge=1, description="Tokens generated per turn.")
    repetition_penalty: float = Field(1.0, gt=0.0, description="HF repetition penalty.")
    do_sample: bool = Field(True, description="Sample (true) or decode greedily (false).")
    stop_on_invalid_json: bool = Field(False, description="End the turn at the first unparsable action.")
    stop: list[str] = Field(default_factory=list, description="Stop strings.")
    stop_ids: list[int] = Field(default_factory=list, description="Stop token ids.")


class PlannerSamplingConfig(SamplingConfig):
    max_input_tokens: int | None = Field(
        None, ge=16, description="Seed 000 name of the planner prompt budget: sets training.max_prompt_length.")


class CGMGenerationConfig(SamplingConfig):
    temperature: float = Field(0.2, ge=0.0, description="Synthesiser temperature.")
    max_new_tokens: int = Field(2048, ge=1, description="Tokens per synthesised patch.")
    num_return_sequences: int = Field(1, ge=1, description="Candidate patches per repair request.")
    timeout_s: float = Field(120.0, gt=0, description="HTTP timeout of one synthesis request.")


class SFTWarmStartConfig(Section):
    """Trajectory SFT warm start before GRPO (graph_planner/training/sft/trainer.py, TRL's SFTTrainer)."""

    affects = frozenset({"train"})
    file_fields = frozenset({"trajectories_dir"})

    enabled: bool = Field(False, description="Run the SFT warm start before GRPO (pipeline/train flows, gp sft).")
    source: Literal["rule", "trajectories"] = Field(
        "rule", description="rule = rule-policy episodes on the training tasks; trajectories = an eval run's files."
    )
    trajectories_dir: str | None = Field(None, description="source=trajectories: an eval run's trajectories/ dir.")
    only_resolved: bool = Field(True, description="Keep only resolved episodes (rejection-sampling fine-tuning).")
    episodes_per_task: int = Field(1, ge=1, description="source=rule: episodes per training task.")
    exploration: float = Field(
        0.0, ge=0.0, le=1.0, description="source=rule: chance that a query or node choice is random (episodes after "
        "the first of each task), for varied demonstrations."
    )
    flow: Literal["explore", "search"] = Field(
        "explore", description="source=rule: explore = find, expand, read, commit, repair, submit; search = find, "
        "commit a hit, repair, submit (two decisions per episode: what a toy model can learn)."
    )
    epochs: float = Field(3.0, gt=0, description="Passes over the SFT examples.")
    max_steps: int = Field(-1, ge=-1, description="Optimiser steps (-1 = set by epochs).")
    batch_size: int = Field(4, ge=1, description="Examples per optimiser step.")
    lr: float = Field(1e-5, gt=0, description="Learning rate (constant).")
    torch_threads: int | None = Field(
        None, ge=1, description="CPU threads for the SFT update (null = training.torch_threads): a batched update "
        "gains from more threads than one-token-at-a-time rollouts do."
    )
    output_dir: str | None = Field(None, description="Where the SFT model goes (default <run dir>/sft).")


class TrainingConfig(AlgorithmKeys, Section):
    affects = frozenset({"train"})
    file_fields = frozenset({"resume_from"})
    backend: Literal["local", "verl"] = Field("local", description="local = one-process GRPO; verl = Ray job.")
    total_epochs: int = Field(1, ge=1, description="Passes over the training data.")
    total_steps: int = Field(4, ge=1, description="Optimiser steps (upper bound across epochs).")
    train_batch_size: int = Field(2, ge=1, description="Tasks (prompts) per GRPO step.")
    group_size: int = Field(4, ge=1, description="Rollouts per task (verl rollout.n).")
    ppo_mini_batch_size: int = Field(2, ge=1, description="Tasks per policy update mini-batch (verl).")
    grad_accum_steps: int = Field(1, ge=1, description="Micro-batches accumulated per optimiser step.")
    precision: Literal["fp32", "bf16", "fp16"] = Field("fp32", description="Training precision.")
    lr: float = Field(1e-5, gt=0, description="AdamW learning rate.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up steps.")
    gradient_checkpointing: bool = Field(False, description="Enable gradient checkpointing where supported.")
    clip_grad_norm: float = Field(1.0, gt=0, description="Max global grad norm.")
    kl_coef: float = Field(0.0, ge=0, description="KL-to-reference coefficient (0 = no reference model).")
    entropy_coef: float = Field(0.0, ge=0, description="Entropy bonus coefficient.")
    clip_ratio_low: float = Field(0.2, gt=0, description="PPO clip epsilon (lower).")
    clip_ratio_high: float = Field(0.28, gt=0, description="PPO clip epsilon (upper; > low = DAPO clip-higher).")
    loss_agg_mode: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = (
        Field("token-mean", description="verl loss aggregation mode.")
    )
    norm_adv_by_std_in_grpo: bool = Field(True, description="GRPO std normalisation (false = Dr.GRPO).")
    reward_norm_grouping: Literal["state", "batch", "group"] = Field(
        "group", description="ROLL-style reward normalisation scope (ROLL 'inductive' = state, "
                             "'traj_group_id' = group)."
    )
    reward_norm_method: Literal["mean_std", "mean", "none", "identity", "asym_clip"] = Field(
        "mean_std", description="Normalisation method (identity = none; asym_clip = mean_std clipped to [-1, 3]).")
    max_prompt_length: int = Field(2048, ge=16, description="Prompt token budget.")
    max_response_length: int = Field(512, ge=1, description="Response token budget per turn.")
    attention_window: int | None = Field(
        None, ge=1, description="verl backend: the planner attends to its last N tokens only (sliding-window "
        "attention; a Llama checkpoint runs as the same-weight Mistral model, and the SFT warm start trains that "
        "model). A verl trajectory is one growing token sequence; with N = max_prompt_length a small-context model "
        "sees what the local engine's per-turn prompts show it, and each observation turn keeps only its last N "
        "tokens, as a per-turn prompt of max_prompt_length does. None = full attention.")
    resume_from: str | None = Field(None, description="Checkpoint dir to resume from ('auto' = latest in run dir).")
    torch_threads: int | None = Field(
        None, ge=1, description="torch CPU threads for the local backend's rollouts (null = torch's default)."
    )
    update_torch_threads: int | None = Field(
        None, ge=1, description="torch CPU threads for the local backend's policy update (null = torch_threads): "
        "nothing else runs during the update, so a batched update gains from threads one-token rollouts lose to."
    )
    kl_loss_type: Literal["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"] = Field(
        "low_var_kl", description="verl KL estimator for the KL-to-reference loss (used when kl_coef > 0)."
    )
    rollout_engine: Literal["vllm", "sglang", "hf"] = Field(
        "vllm", description="verl backend: inference engine of the rollout (actor_rollout_ref.rollout.name); hf = "
        "transformers.generate (graph_planner.training.verl.hf_rollout: the rollout on a GPU-less local head, and "
        "on a GPU without vLLM / SGLang)."
    )
    env_groups: int = Field(
        1, ge=1, description="ROLL env groups: GRPO groups (one task x group_size envs) rolled out at the same time "
                             "(seed name env.env_groups)."
    )
    max_traj_per_env: int | None = Field(
        None, ge=1, description="ROLL: trajectories one env instance may produce per step (null = derived, "
        "ceil(train_batch_size / env_groups); a smaller value is an error) (seed name env.max_traj_per_env)."
    )
    sft: SFTWarmStartConfig = Field(default_factory=SFTWarmStartConfig)

    @field_validator("max_traj_per_env", mode="before")
    @classmethod
    def _roll_unlimited(cls, value: Any) -> Any:
        """ROLL's ``-1`` = no cap = our null (derived)."""
        return None if value == -1 else value


class EnvConfig(Section):
    affects = TRAIN_EVAL
    max_steps: int = Field(8, ge=1, description="Planner steps per episode.")
    success_reward: float = Field(1.0, ge=0, description="Reward when the task is resolved.")
    reward_scale: float = Field(1.0, gt=0, description="Multiplier on the success reward.")
    step_penalty: float = Field(0.0, ge=0, description="Subtracted each step (non-negative).")
    failure_penalty: float = Field(0.0, ge=0, description="Subtracted when an episode ends unresolved.")
    tamper_penalty: float = Field(1.0, ge=0, description="Subtracted (with failure_penalty) when the graded run of "
                                  "the submitted tree was forged from inside the test process (verdict tampered); "
                                  "such an episode gets no localisation reward.")
    timeout_penalty: float = Field(0.0, ge=0, description="Subtracted when a step/op limit ends the episode.")
    format_penalty: float = Field(0.05, ge=0, description="Subtracted for an invalid (unparsable) action "
                                                         "(ROLL's negative spelling, e.g. -0.15, means the same).")
    repo_op_limit: int = Field(40, ge=1, description="Max sandbox operations per episode.")
    disable_cgm_synthesis: bool = Field(False, description="Planner only: repair is refused.")
    apply_patches: bool = Field(True, description="Apply synthesised patches in the sandbox.")
    use_rule_fallback: bool = Field(False, description="On a parse error, take the rule policy's action.")
    @field_validator("format_penalty", mode="before")
    @classmethod
    def _roll_negative_format_penalty(cls, value: Any) -> Any:
        """ROLL writes the format penalty as a negative reward; ours is the magnitude that is subtracted."""
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            return -value
        return value

    memory_max_nodes: int = Field(40, ge=1, description="Cap on nodes in curated memory M.")
    working_max_nodes: int = Field(200, ge=1, description="Cap on nodes in working graph W.")
    patch_max_files: int = Field(5, ge=1, description="Patch guard: most files one repair patch may touch.")
    patch_max_lines: int = Field(200, ge=1, description="Patch guard: most changed (added+removed) lines per patch.")
    synthesis_token_budget: int = Field(
        6000, ge=256, description="Token budget (chars/4) of the memory subgraph and snippets sent to the synthesiser."
    )
    history_turns: int = Field(
        6, ge=0, description="Previous planner turns (action + observation) kept in the model's prompt."
    )
    observation_token_budget: int = Field(
        2000, ge=64, description="Most tokens (chars/4) one action's result may take in an observation: a longer "
        "one (a huge read or test output) keeps its head and tail around a marker, as verl's tool agent loop cuts "
        "tool responses, and the episode goes on."
    )
    localisation_reward: float = Field(
        0.0, ge=0, description="Shaped reward: added once at episode end, times the peak share of the gold patch's "
        "nodes memory M held (0 = off; tasks without a gold patch get none)."
    )


class ImagesConfig(Section):
    """Task images: which manifest lists them and how they are prepulled (seed names: env.docker_manifest,
    env.prepull_containers, env.prepull_*)."""

    affects = TRAIN_EVAL
    field_affects = {"manifest": frozenset({"manifest", "train", "eval"})}
    file_fields = frozenset({"manifest"})
    manifest: str | None = Field(None, description="Explicit docker image manifest (wins over discovery).")
    prepull: bool = Field(False, description="Prepull manifest images before training/eval.")
    prepull_max_workers: int = Field(8, ge=1, description="Parallel pulls.")
    prepull_retries: int = Field(3, ge=0, description="Retries per image.")
    prepull_delay: float = Field(2.0, ge=0, description="Seconds between retries (doubles each time).")
    prepull_timeout: float = Field(600.0, gt=0, description="Seconds per pull.")


class SandboxConfig(Section):
    affects = TRAIN_EVAL
    cpus: float = Field(1.0, gt=0, description="Docker CPU limit per container.")
    memory: str = Field("2g", description="Docker memory limit per container: a Docker size (bytes or "
                        "<n>b/k/m/g, e.g. 512m, 2g), at least 6m (Docker's minimum).")
    pids_limit: int = Field(512, ge=16, description="Docker pids limit per container.")
    network: bool = Field(False, description="Allow network inside the sandbox.")
    exec_timeout: float = Field(120.0, gt=0, description="Default seconds per command.")
    test_timeout: float = Field(600.0, gt=0, description="Seconds per test run.")
    local_isolate_pytest_plugins: bool = Field(
        True, description="local backend: don't autoload the host venv's pytest plugins into the task's test runs."
    )
    grade_in_fresh_sandbox: bool = Field(
        True, description="Grade an episode's submitted diff in a fresh sandbox (not the one the agent's code ran "
        "in), so nothing left behind during the episode can steer the verdict; costs one sandbox start per episode."
    )
    local_isolation: Literal["auto", "bwrap", "netns", "none"] = Field(
        "auto", description="local backend wrapper: bwrap (read-only system, writable copy only, no network; an "
        "error when unusable), netns (network cut only), none, or auto = the strongest that works (docs/security.md)."
    )

    @field_validator("memory")
    @classmethod
    def _docker_size(cls, value: str) -> str:
        match = _DOCKER_SIZE.fullmatch(value.strip())
        if not match:
            raise ValueError(f"{value!r} is not a Docker size: use bytes or a number with b, k, m or g "
                             "(e.g. 512m, 2g)")
        number, unit = float(match.group(1)), (match.group(2) or "b").lower()[0]
        if number * _SIZE_UNITS[unit] < 6 * 1024 * 1024:
            raise ValueError(f"{value!r} is below Docker's minimum memory limit of 6m")
        return value.strip()


_DOCKER_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([bkmgBKMG][bB]?)?")
_SIZE_UNITS = {"b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}


class ParallelConfig(Section):
    affects = frozenset({"train"})
    tensor_parallel_planner: int = Field(1, ge=1, description="TP degree of the planner engine.")
    tensor_parallel_cgm: int = Field(1, ge=0, description="TP degree of the CGM engine (0 = no local CGM engine).")
    replicas: int = Field(1, ge=1, description="Inference engine replicas.")
    parallel_agents: int = Field(1, ge=1, description="Concurrent agent episodes.")
    rollout_workers: int = Field(1, ge=1, description="Rollout worker processes.")
    workflow_parallel: int = Field(
        None, ge=1, validate_default=False,
        description="Concurrent sandboxes / workflow slots (null = max(parallel_agents, rollout_workers)).")

    @model_validator(mode="after")
    def _derived_slots(self) -> ParallelConfig:
        """Unset workflow_parallel = enough slots for every agent and worker (seed 000 preflight rule 3)."""
        if self.workflow_parallel is None:
            object.__setattr__(self, "workflow_parallel", max(self.parallel_agents, self.rollout_workers))
        return self


class ResourcesConfig(Section):
    affects = frozenset({"train"})
    num_gpus: int = Field(0, ge=0, description="GPUs per node.")
    num_nodes: int = Field(1, ge=1, description="Nodes.")
    ray_address: str | None = Field(None, description="Ray cluster address (default: RAY_ADDRESS or a local head).")
    ray_num_gpus: int = Field(0, ge=0, description="GPUs Ray may schedule.")
    ray_num_cpus: int = Field(4, ge=1, description="CPUs Ray may schedule.")
    ray_memory: int | None = Field(None, ge=0, description="Ray memory (bytes).")
    ray_object_store_memory: int | None = Field(None, ge=0, description="Ray object store size (bytes).")
    job_deadline_s: float = Field(86400.0, gt=0, description="Ray job deadline; the job is stopped after it.")
    rpc_timeout: float | None = Field(
        None, gt=0, description="ROLL Ray RPC timeout (s): verl trainer.ray_wait_register_center_timeout.")
    system_envs: dict[str, str] = Field(
        default_factory=dict, description="ROLL: env vars set for the training job (Ray runtime_env env_vars).")
    ray_job_python: str = Field(
        "python", description="Interpreter the Ray job entrypoint runs with on the cluster (e.g. a venv's python)."
    )


class WandbWatchConfig(Section):
    affects = frozenset({"train"})
    enabled: bool = Field(False, description="Call wandb.watch on local models.")
    log: Literal["gradients", "parameters", "all"] = Field("gradients", description="What wandb.watch logs.")
    log_freq: int = Field(200, ge=1, description="Steps between watch logs.")


class WandbConfig(Section):
    affects = frozenset({"train"})
    # where a run is filed in W&B, never what it computes: a new pipeline run's group must not re-run training
    field_affects = {"group": frozenset(), "tags": frozenset(), "log_checkpoints": frozenset()}
    enabled: bool = Field(False, description="Log to Weights & Biases.")
    offline: bool = Field(False, description="Write local W&B runs only (sync later).")
    project: str = Field("graph-planner", description="W&B project.")
    entity: str | None = Field(None, description="W&B entity.")
    run_name: str | None = Field(None, description="W&B run name (default: run name).")
    api_key: SecretStr | None = Field(None, description="W&B API key (never written; prefer WANDB_API_KEY).")
    watch: WandbWatchConfig = Field(default_factory=WandbWatchConfig)
    tags: list[str] = Field(default_factory=list, description="Extra W&B tags (config name, backend and git sha "
                            "are always added).")
    group: str | None = Field(None, description="W&B group (default: the run name, so a run's train and eval "
                              "runs sit together; the pipeline flow sets one group per flow run).")
    log_checkpoints: bool = Field(False, description="Upload the final checkpoint as a W&B model artifact.")


#: Tracker names (``console`` = stdout) that may key ``logging.tracker_kwargs``.
TRACKER_NAMES = frozenset({"wandb", "tensorboard", "stdout", "jsonl", "console"})


class LoggingConfig(Section):
    affects = frozenset({"train"})
    field_affects = {"output_dir": TRAIN_EVAL}
    wandb: WandbConfig = Field(default_factory=WandbConfig)
    log_backend: str = Field("stdout", description="Trackers, comma separated: wandb, tensorboard, stdout, jsonl.")
    track_with: list[str] | None = Field(
        None, description="ROLL-style tracker list or one name (overrides log_backend).")
    tracker_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra kwargs per tracker ({tensorboard: {...}}), or ROLL's flat kwargs "
                                          "for the one selected tracker ({log_dir: ...}).")
    output_dir: str = Field("outputs", description="Root of run directories (output_dir / run name for a named run, "
                            "output_dir / <name>-<UTC timestamp> for an unnamed one).")
    save_interval: int = Field(2, ge=1, description="Steps between checkpoints.")
    eval_interval: int = Field(0, ge=0, description="Steps between evaluations (0 = off).")
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level.")

    @field_validator("track_with", mode="before")
    @classmethod
    def _roll_track_with_string(cls, value: Any) -> Any:
        """ROLL writes ``track_with: tensorboard``; a comma list works too."""
        if isinstance(value, str):
            return [t.strip() for t in value.split(",") if t.strip()]
        return value

    @model_validator(mode="after")
    def _flat_tracker_kwargs(self) -> LoggingConfig:
        """ROLL's flat ``tracker_kwargs`` ({log_dir: ...}) belong to the one selected tracker."""
        kwargs = self.tracker_kwargs
        if not kwargs or set(kwargs) <= TRACKER_NAMES:
            return self
        if set(kwargs) & TRACKER_NAMES:
            raise ValueError(f"logging.tracker_kwargs mixes tracker sections and flat arguments: {sorted(kwargs)}")
        names = [t for t in self.trackers() if t != "wandb" or not self.wandb.enabled]
        if len(names) != 1:
            raise ValueError(f"logging.tracker_kwargs {sorted(kwargs)} is flat (ROLL style) but {len(names)} trackers "
                             f"are selected ({names}); nest it per tracker, e.g. tracker_kwargs.tensorboard")
        object.__setattr__(self, "tracker_kwargs", {names[0]: dict(kwargs)})
        return self

    def trackers(self) -> list[str]:
        """The selected tracker names, `track_with` winning over `log_backend`."""
        if self.track_with is not None:
            return list(self.track_with)
        return [t.strip() for t in self.log_backend.split(",") if t.strip()]


class TelemetryConfig(Section):
    affects = frozenset()  # what is logged, never what is computed
    log_gpu: bool = Field(True, description="Sample GPU stats (nvidia-ml-py).")
    log_ray: bool = Field(True, description="Sample ray.available_resources().")
    log_patch_stats: bool = Field(True, description="Log patch_* metrics.")
    log_planner_parse_errors: bool = Field(True, description="Log planner_parse_error_rate.")
    log_cgm_errors: bool = Field(True, description="Log synthesiser errors (reject/*).")
    heartbeat_interval_s: float = Field(30.0, gt=0, description="Seconds between heartbeats.")


class DataConfig(Section):
    affects = frozenset({"data"})
    field_affects = {"dataset_name": frozenset({"register"})}
    file_fields = frozenset({"r2e_dataset", "swebench_dataset", "custom_path", "repos_dir", "synth_repos"})
    output_dir: str = Field("prepared", description="Where `gp data prepare` writes its sources.")
    hf_token: SecretStr | None = Field(None, description="HF token (default: HF_TOKEN env; never written).")
    r2e_dataset: str = Field("R2E-Gym/R2E-Gym-Lite", description="R2E-Gym hub name or local path.")
    r2e_split: str = Field("train", description="R2E split to read.")
    r2e_val_split: str | None = Field(None, description="R2E split used as val (else carved from train).")
    r2e_val_size: int = Field(0, ge=0, description="Rows carved off the head of train for val.")
    r2e_limit: int | None = Field(None, ge=1, description="Max R2E rows.")
    skip_r2e: bool = Field(False, description="Skip the R2E source.")
    swebench_dataset: str = Field("princeton-nlp/SWE-bench_Verified", description="SWE-bench hub name or path.")
    swebench_split: str = Field("test", description="SWE-bench split.")
    swebench_limit: int | None = Field(None, ge=1, description="Max SWE-bench rows.")
    skip_swebench: bool = Field(False, description="Skip the SWE-bench source.")
    custom_path: str | None = Field(None, description="A custom task file (JSON/JSONL/YAML of TaskRecords).")
    repos_dir: str | None = Field(
        None, description="Dir of local repo trees (<repos_dir>/<repo short name>) copied next to the prepared data."
    )
    dataset_name: str = Field("graph_planner", description="Registered dataset name.")
    max_steps: int = Field(30, ge=1, description="max_steps written into each TaskRecord.")
    synth_repos: list[str] = Field(
        default_factory=list, description="Python repositories (with a pytest suite) to synthesise tasks from when "
        "preparing (source synth, as `gp data synth`); empty = none.")
    synth_seed: int = Field(0, description="Seed of the synth source (targets, modifiers, split).")
    synth_per_target: int = Field(2, ge=1, description="Candidate bugs per function or class (synth source).")
    synth_max_tasks: int | None = Field(None, ge=1, description="Validated tasks per repository (synth source; "
                                        "None = every candidate is judged).")
    synth_val_frac: float = Field(0.15, ge=0.0, lt=1.0, description="Share of code locations held out as val "
                                  "(synth source; split by location, docs/data.md).")
    synth_test_frac: float = Field(0.15, ge=0.0, lt=1.0, description="Share of code locations held out as test "
                                   "(synth source).")


class EvalConfig(Section):
    affects = frozenset({"eval"})
    split: str = Field("test", description="Split evaluated by `gp eval`.")
    batch_size: int = Field(2, ge=1, description="Concurrent episodes (sandboxes).")
    executor: Literal["local", "ray"] = Field("local", description="Where episodes run.")
    limit: int | None = Field(None, ge=1, description="Max tasks.")
    baselines: bool = Field(False, description="Also run gold and empty-patch baseline rows.")
    ray_cpus_per_episode: float = Field(
        1.0, gt=0, description="executor=ray: CPUs each episode reserves, so a node runs at most cpus/this at once."
    )
    model_name: str | None = Field(None, description="model_name_or_path in predictions.jsonl (default: run name).")
    compare_stages: bool = Field(
        False, description="pipeline (either engine): also play the base, SFT and GRPO models on the train and val "
        "tasks (as rollouts do) and put the before/after table in the report."
    )
    compare_episodes_per_task: int = Field(
        4, ge=1, description="compare_stages: episodes per task and stage (sampled as in training; more = steadier "
        "rates, played concurrently with parallel.parallel_agents)."
    )
    use_swebench_harness: bool = Field(
        False, description="Also grade predictions.jsonl with the official swebench harness (swebench-source tasks, "
                           "images present in the local Docker engine); its numbers go next to ours in the report."
    )


class RunConfig(Section):
    """The whole run configuration: defaults < YAML < CLI (see graph_planner.config.loader)."""

    field_affects = {"verl_overrides": frozenset({"train"}), "resolved_run_dir": frozenset(),
                     "resolved_config_path": frozenset()}

    experiment: ExperimentConfig = Field(default_factory=ExperimentConfig)
    paths: PathsConfig = Field(default_factory=PathsConfig)
    backends: BackendsConfig = Field(default_factory=BackendsConfig)
    planner_sampling: PlannerSamplingConfig = Field(default_factory=PlannerSamplingConfig)
    cgm_generation: CGMGenerationConfig = Field(default_factory=CGMGenerationConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    parallel: ParallelConfig = Field(default_factory=ParallelConfig)
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    verl_overrides: dict[str, Any] = Field(
        default_factory=dict, description="Any verl Hydra key (dotted or nested), passed through unchanged."
    )
    resolved_run_dir: str | None = Field(None, description="Filled by the loader: the run directory (an unnamed "
                                         "run's <name>-<stamp> dir is kept when this file is reloaded).")
    resolved_config_path: str | None = Field(None, description="Filled by the loader: where this file was written.")

    @model_validator(mode="before")
    @classmethod
    def _seed_key_names(cls, data: Any) -> Any:
        """Seed key names that moved (config.aliases), ROLL top-level keys to their section, and
        planner_sampling.max_input_tokens as the prompt budget."""
        if not isinstance(data, dict):
            return data
        data = move_seed_keys(move_roll_keys(data))
        paths, backends = data.get("paths"), data.get("backends")
        if isinstance(paths, dict) and paths.get("cgm_model") and not (
                isinstance(backends, dict) and "cgm_backend" in backends):
            # seed 000 section 7: naming CGM weights (paths.cgm_model / --cgm-model-path) switches Planner->CGM on;
            # without a backend they are local weights (hf). --disable-cgm-synthesis still turns repair off.
            data["backends"] = {**(backends if isinstance(backends, dict) else {}), "cgm_backend": "hf"}
        sampling = data.get("planner_sampling")
        budget = sampling.get("max_input_tokens") if isinstance(sampling, dict) else None
        if budget is not None:
            training = dict(data.get("training") or {})
            given = training.get("max_prompt_length")
            if given is not None and given != budget:
                raise ValueError(f"planner_sampling.max_input_tokens ({budget}) and training.max_prompt_length "
                                 f"({given}) are the same budget; give one of them")
            training["max_prompt_length"] = budget
            data["training"] = training
        return data

    @field_validator("verl_overrides")
    @classmethod
    def _flat_keys_are_strings(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, item in value.items():
            if not isinstance(key, str) or not key:
                raise ValueError(f"verl_overrides keys must be non-empty strings, got {key!r}")
            if isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"verl_overrides.{key}: not a finite number (got {item})")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        t = self.training
        if t.clip_ratio_high < t.clip_ratio_low:
            raise ValueError(
                f"training.clip_ratio_high ({t.clip_ratio_high}) must be >= training.clip_ratio_low "
                f"({t.clip_ratio_low})"
            )
        if t.train_batch_size % t.ppo_mini_batch_size != 0:
            raise ValueError(
                f"training.train_batch_size ({t.train_batch_size}) must be a multiple of "
                f"training.ppo_mini_batch_size ({t.ppo_mini_batch_size})"
            )
        unknown = set(self.logging.trackers()) - TRACKER_NAMES
        if unknown:
            raise ValueError(f"logging.log_backend/track_with: unknown tracker(s) {sorted(unknown)}")
        if t.group_size < 2 and t.adv_estimator in GROUP_ESTIMATORS:
            raise ValueError(f"training.group_size ({t.group_size}) must be >= 2 with adv_estimator="
                             f"{t.adv_estimator}: its advantage compares the rollouts of one task, so a group of one "
                             "has nothing to compare and no step can learn")
        problems = backend_problems(t)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def run_name(self) -> str:
        """The run's name: experiment.run_name, else the seed's logging.wandb.run_name, else experiment.name (its
        directory: :func:`graph_planner.config.paths.run_paths`; an unnamed run's has a timestamp)."""
        return self.experiment.run_name or self.logging.wandb.run_name or self.experiment.name
