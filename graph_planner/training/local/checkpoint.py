"""Local-backend checkpoints: ``<run_dir>/checkpoints/step_<k>/`` written atomically, plus a ``latest`` pointer.

A checkpoint holds everything a resumed run needs to continue as if it had never stopped: the model and tokenizer
(``save_pretrained``, so a checkpoint is also an ordinary HF model dir), optimizer / scheduler / grad-scaler state,
the step, the RNG states of python, numpy and torch, and the data-order state.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch

# the layout and the finder are shared with the verl engine's output: graph_planner.config.checkpoints
from graph_planner.config.checkpoints import (  # noqa: F401 - re-exported: this module's readers use them
    LATEST,
    MODEL_DIR,
    STATE_FILE,
    checkpoint_root,
    latest_checkpoint,
)
from graph_planner.config.paths import CHECKPOINTS  # noqa: F401 - re-exported

META_FILE = "meta.json"


def capture_rng() -> dict[str, Any]:
    """RNG states of python, numpy and torch (CPU and, when present, every CUDA device)."""
    state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(),
                             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: str | Path, step: int, model: Any, tokenizer: Any, state: dict[str, Any]) -> Path:
    """Write ``step_<step>`` (tmp dir + rename, so readers never see a partial one) and move ``latest`` to it."""
    root = checkpoint_root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step}"
    tmp = root / f".step_{step}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        model.save_pretrained(tmp / MODEL_DIR)
        tokenizer.save_pretrained(tmp / MODEL_DIR)
        torch.save({**state, "step": step}, tmp / STATE_FILE)
        (tmp / META_FILE).write_text(json.dumps({"step": step}, indent=2), encoding="utf-8")
        if final.exists():  # re-saving a step (a resumed run passing the same step again): replace it whole
            trash = root / f".trash-{uuid.uuid4().hex[:8]}"
            os.rename(final, trash)
            shutil.rmtree(trash, ignore_errors=True)
        os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    pointer_tmp = root / f".{LATEST}.tmp-{uuid.uuid4().hex[:8]}"
    pointer_tmp.write_text(final.name, encoding="utf-8")
    os.replace(pointer_tmp, root / LATEST)
    return final


def remove_orphan_temps(run_dir: str | Path) -> list[Path]:
    """Remove what a save killed midway left (``.step_K.tmp-*``, ``.latest.tmp-*``, ``.trash-*``): readers never
    look at them, so nothing else would ever remove them. Call with the run lock held (no save in flight)."""
    root = checkpoint_root(run_dir)
    orphans = sorted(p for pattern in (".step_*.tmp-*", f".{LATEST}.tmp-*", ".trash-*") for p in root.glob(pattern))
    for path in orphans:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return orphans


def checkpoint_step(checkpoint_dir: str | Path) -> int:
    """The training step a checkpoint dir holds (its meta file)."""
    return int(json.loads((Path(checkpoint_dir) / META_FILE).read_text(encoding="utf-8"))["step"])


def resolve_resume(resume_from: str | None, run_dir: str | Path) -> Path | None:
    """``None`` -> fresh start; ``'auto'`` -> the run dir's latest checkpoint (fresh if none); else that dir."""
    if resume_from is None:
        return None
    if resume_from == "auto":
        return latest_checkpoint(run_dir)
    path = Path(resume_from)
    if not (path / STATE_FILE).is_file():
        raise FileNotFoundError(f"training.resume_from={resume_from!r}: no {STATE_FILE} there; expected a "
                                f"checkpoint dir like {checkpoint_root(run_dir)}/step_<k> or 'auto'")
    return path


def load_trainer_state(checkpoint_dir: str | Path) -> dict[str, Any]:
    """Optimizer/scheduler/RNG/data-order state of a checkpoint (our own file, hence ``weights_only=False``)."""
    return torch.load(Path(checkpoint_dir) / STATE_FILE, map_location="cpu", weights_only=False)
