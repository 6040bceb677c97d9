"""The one checkpoint finder: where a training run's models are, whichever engine wrote them, and back from a
model to the run that trained it. Used by the train API (its outcome), the learning report (the GRPO curve of
the run) and the eval report (the run's curves); torch-free, so it sits in the config layer beside the paths.

Layouts under ``<run dir>/checkpoints``:
- local engine: ``step_<k>/`` (``model/`` = an ordinary HF model dir, ``trainer_state.pt``) and a ``latest``
  pointer file naming the newest step (:mod:`graph_planner.training.local.checkpoint` writes them);
- verl engine: ``global_step_<k>/actor/huggingface`` (written when ``actor.checkpoint.save_contents`` has
  ``hf_model``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from graph_planner.config.paths import CHECKPOINTS, RESOLVED_CONFIG

LATEST = "latest"
MODEL_DIR = "model"
STATE_FILE = "trainer_state.pt"
VERL_STEP_PREFIX = "global_step_"


def checkpoint_root(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINTS


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The local engine's checkpoint ``latest`` points at, or None when the run has none yet."""
    root = checkpoint_root(run_dir)
    pointer = root / LATEST
    if not pointer.is_file():
        return None
    path = root / pointer.read_text(encoding="utf-8").strip()
    if not (path / STATE_FILE).is_file():
        raise FileNotFoundError(f"{pointer} points at {path}, which has no {STATE_FILE}; delete the pointer or "
                                "set training.resume_from to an existing step_<k> dir")
    return path


def latest_verl_model(root: str | Path) -> Path | None:
    """The verl engine's newest ``global_step_<k>/actor/huggingface`` dir holding weights under ``root`` (the
    checkpoint root); None when there is none."""
    steps = sorted(Path(root).glob(f"{VERL_STEP_PREFIX}*"), key=lambda p: int(p.name.rsplit("_", 1)[-1]))
    for step in reversed(steps):
        hf = step / "actor" / "huggingface"
        if hf.is_dir() and (any(hf.glob("*.safetensors")) or any(hf.glob("*.bin"))):
            return hf
    return None


@dataclass(frozen=True)
class TrainedModel:
    """A run's final model: the checkpoint dir (``step_<k>`` / ``global_step_<k>``), its HF model dir, the step."""

    checkpoint: Path
    model_dir: Path
    step: int


def final_model(run_dir: str | Path) -> TrainedModel | None:
    """The newest model a training run wrote, local engine first (its ``latest`` pointer), else verl's newest HF
    dir; None when the run wrote none."""
    local = latest_checkpoint(run_dir)
    if local is not None:
        return TrainedModel(local, local / MODEL_DIR, int(local.name.rsplit("_", 1)[-1]))
    hf = latest_verl_model(checkpoint_root(run_dir))
    if hf is not None:
        step_dir = hf.parent.parent
        return TrainedModel(step_dir, hf, int(step_dir.name.removeprefix(VERL_STEP_PREFIX)))
    return None


def run_dir_of(path: str | Path) -> Path | None:
    """The run directory that wrote ``path`` (a model, a checkpoint, an eval dir): its nearest parent holding a
    resolved config; None when no parent does (e.g. a hub id or a model from elsewhere)."""
    for parent in Path(path).parents:
        if (parent / RESOLVED_CONFIG).is_file():
            return parent
    return None
