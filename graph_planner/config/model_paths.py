"""Model paths that cannot load, found before a run starts: ``paths.planner_model`` (and the local synthesiser's
``paths.cgm_model``) must be ``toy``, an existing model directory, or a valid HF hub id; offline
(``HF_HUB_OFFLINE``) a hub id must already be in the local cache. Without this check a typo surfaced as a
100-line traceback from the hub client once the run had started."""

from __future__ import annotations

import os
from pathlib import Path

from graph_planner.config.schema import RunConfig

#: Files a model directory or cached hub snapshot is recognised by.
MODEL_FILES = ("config.json",)


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("", "0", "false", "no", "off")


def _is_hub_id(value: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if value.startswith(("/", "./", "../", "~")) or value.count("/") > 1:
        return False
    try:
        validate_repo_id(value)
    except HFValidationError:
        return False
    return True


def _cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return any(isinstance(try_to_load_from_cache(repo_id, name), str) for name in MODEL_FILES)


def model_path_problem(key: str, value: str) -> str | None:
    """Why ``value`` (the setting ``key``) cannot be loaded as a model, or None when it can (or may: an online
    hub id is left to the hub)."""
    if value == "toy":
        return None
    path = Path(value).expanduser()
    if path.is_dir():
        return None
    if path.exists():
        return f"{key}={value!r}: is a file; give a model directory (with config.json), a hub id or 'toy'"
    if not _is_hub_id(value):
        return f"{key}={value!r}: does not exist (not a directory, and not a valid HF hub id); give a model " \
               "directory, a hub id (org/name) or 'toy'"
    if hub_offline() and not _cached(value):
        return f"{key}={value!r}: no such directory, and the hub id is not in the local HF cache (HF_HUB_OFFLINE " \
               "is set); download it first (huggingface-cli download) or give a model directory"
    return None


def model_path_problems(config: RunConfig, training: bool = False, planner: bool = True) -> list[str]:
    """The model settings of ``config`` that would fail to load in this process: the planner model when a local
    model plays (``training``: always, the trainer loads it; ``planner=False``: never, the rule policy plays, as
    in `gp smoke`) and the local (hf) synthesiser's weights."""
    checks: list[tuple[str, str | None]] = []
    b = config.backends
    plays_local_model = planner and config.experiment.agent != "cgm" and b.planner_backend in ("toy", "hf")
    if training or plays_local_model:
        checks += [("paths.planner_model", config.paths.planner_model),
                   ("paths.planner_tokenizer", config.paths.planner_tokenizer)]
    if b.cgm_backend == "hf" and not config.env.disable_cgm_synthesis:
        checks += [("paths.cgm_model", config.paths.cgm_model), ("paths.cgm_tokenizer", config.paths.cgm_tokenizer)]
    return [problem for key, value in checks if value
            for problem in [model_path_problem(key, value)] if problem]
