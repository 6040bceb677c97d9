"""ROLL (seed 004) pipeline-config spellings moved onto our sections before validation.

ROLL writes its pipeline keys at the top level (``exp_name``, ``track_with``, ``ppo_epochs``, ...) and its env
manager under ``train_env_manager``. Each key with a counterpart here is moved to it (the resolved config then
holds only our names); a ROLL key with no counterpart stays where it is and fails as an unknown key, and a
value given both ways differently is an error naming both. docs/seed_compatibility.md lists every key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from graph_planner.config.algorithm import AlgorithmKeys

#: ROLL top-level key -> our dotted key.
TOP_LEVEL: dict[str, str] = {
    "exp_name": "experiment.name",
    "seed": "experiment.seed",
    "output_dir": "logging.output_dir",
    "track_with": "logging.track_with",
    "tracker_kwargs": "logging.tracker_kwargs",
    "rpc_timeout": "resources.rpc_timeout",
    "system_envs": "resources.system_envs",
    "num_gpus_per_node": "resources.num_gpus",
    "num_nodes": "resources.num_nodes",
    "max_steps": "training.total_steps",
    "save_steps": "logging.save_interval",
    "eval_steps": "logging.eval_interval",
    "resume_from_checkpoint": "training.resume_from",
    "rollout_batch_size": "training.train_batch_size",
    "prompt_length": "training.max_prompt_length",
    "response_length": "training.max_response_length",
    "num_return_sequences_in_group": "training.group_size",
    "max_grad_norm": "training.clip_grad_norm",
    "entropy_loss_coef": "training.entropy_coef",
    "kl_loss_coef": "training.kl_coef",
    "loss_agg_mode": "training.loss_agg_mode",
    "reward_normalization": "training.reward_normalization",
    **{name: f"training.{name}" for name in AlgorithmKeys.model_fields},
}
#: ROLL ``train_env_manager`` key -> our dotted key.
ENV_MANAGER: dict[str, str] = {
    "env_groups": "training.env_groups",
    "group_size": "training.group_size",
    "max_traj_per_env": "training.max_traj_per_env",
    "format_penalty": "env.format_penalty",
}
#: Value rewrites: ROLL's ``resume_from_checkpoint: true`` = resume the latest checkpoint of the run dir.
VALUES: dict[str, Callable[[Any], Any]] = {
    "resume_from_checkpoint": lambda v: ("auto" if v is True else None if v is False else v),
}


def move_roll_keys(tree: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``tree`` with ROLL's top-level and ``train_env_manager`` keys moved to our sections."""
    out = dict(tree)
    moves: list[tuple[str, str, Any]] = []
    for key, target in TOP_LEVEL.items():
        if key in out and not (key == "seed" and isinstance(out[key], Mapping)):
            moves.append((key, target, VALUES.get(key, lambda v: v)(out.pop(key))))
    manager = out.get("train_env_manager")
    if isinstance(manager, Mapping):
        rest = dict(manager)
        for key, target in ENV_MANAGER.items():
            if key in rest:
                moves.append((f"train_env_manager.{key}", target, rest.pop(key)))
        if rest:
            raise ValueError(f"train_env_manager: {sorted(rest)} have no counterpart here (ROLL env-manager "
                             f"workers/tags); only {sorted(ENV_MANAGER)} map (docs/seed_compatibility.md)")
        out.pop("train_env_manager")
    for source, target, value in moves:
        section_name, key = target.split(".", 1)
        section = out.get(section_name)
        section = dict(section) if isinstance(section, Mapping) else {}
        if key in section and section[key] != value:
            raise ValueError(f"{source} (ROLL) = {value!r} contradicts {target} = {section[key]!r}; give one")
        section[key] = value
        out[section_name] = section
    return out
