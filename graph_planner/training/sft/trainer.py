"""Trajectory SFT warm start (``gp sft``, the pipeline's ``sft`` step): fine-tune the planner on chat examples
built from trajectories (:mod:`graph_planner.training.sft.data`) with TRL's ``SFTTrainer``; the result is an
ordinary HF model dir that ``gp train`` takes as ``paths.planner_model``.

Why TRL's SFTTrainer and not verl's SFT trainer: it trains in this process on whatever device is there (CPU for
the toy model, one GPU for a real checkpoint; ``accelerate launch`` for several), takes HF model dirs in and out,
and accepts pre-tokenised rows with a ``completion_mask`` (loss on the response tokens only), which lets us
tokenise exactly as rollouts do. verl's SFT trainers run under torchrun with FSDP and read parquet files, so on a
laptop they would need the same CPU shims the verl GRPO backend needs, for no gain at this size.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph_planner.config.schema import RunConfig
from graph_planner.disk import atomic_write_text

log = logging.getLogger(__name__)

MODEL_DIR = "model"


def _epoch_log_callback(progress: Callable[[str], None], lines: int = 8):  # -> TrainerCallback (lazy import)
    """About ``lines`` progress lines over the run (every k-th epoch and the last): loss and token accuracy."""
    from graph_planner.imports import import_lock

    with import_lock():  # SFT may build its demonstrations in episode threads that import transformers too
        from transformers import TrainerCallback

    class EpochLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001 - transformers' signature
            if not logs or "loss" not in logs:
                return
            epoch, total = round(float(logs.get("epoch", 0))), args.num_train_epochs
            if epoch % max(1, math.ceil(total / lines)) == 0 or epoch >= total:
                progress(f"SFT epoch {epoch}/{total:g}: loss {float(logs['loss']):.4f}, token accuracy "
                         f"{float(logs.get('mean_token_accuracy', 0.0)):.3f}")

    return EpochLog()


@dataclass
class SFTResult:
    model_dir: Path
    examples: int
    episodes: int
    episodes_kept: int
    train_loss: float
    seconds: float


def sft_output_dir(config: RunConfig) -> Path:
    """``training.sft.output_dir``, else ``<run dir>/sft``."""
    from graph_planner.config.paths import run_paths

    if config.training.sft.output_dir:
        return Path(config.training.sft.output_dir)
    return run_paths(config).sft


def run_sft(config: RunConfig, out_dir: str | Path | None = None,
            collected: tuple[list[Any], dict[str, int]] | None = None,
            progress: Callable[[str], None] | None = None) -> SFTResult:
    """Collect the examples (or take ``collected`` = :func:`collect_examples`'s result), fine-tune
    ``paths.planner_model`` on them, save ``<out>/model`` (+ ``sft.json``). ``progress`` gets a line every few
    epochs (default: this module's logger)."""
    import time

    import torch

    from graph_planner.imports import import_lock
    from graph_planner.models.loading import load_causal_lm
    from graph_planner.models.toy import resolve_model_path
    from graph_planner.training.background_imports import SFT_IMPORTS, import_in_background
    from graph_planner.training.sft.data import collect_examples, tokenize_example

    started = time.monotonic()
    sft, t = config.training.sft, config.training
    out = Path(out_dir) if out_dir is not None else sft_output_dir(config)
    threads = sft.torch_threads or t.torch_threads
    if threads is not None:
        torch.set_num_threads(threads)
    loading = import_in_background(*SFT_IMPORTS) if collected is None else None  # TRL (~5 s) loads meanwhile
    examples, counts = collected if collected is not None else collect_examples(config)
    if loading is not None:
        # the imports below must not race that thread's: a half-imported trl raised "cannot import name
        # 'SFTConfig' from 'trl'" when the examples came quickly (trajectory files) on a busy machine
        loading.join()
    with import_lock():
        from datasets import Dataset
        from transformers import AutoTokenizer, PrinterCallback
        from trl import SFTConfig as TRLSFTConfig
        from trl import SFTTrainer

    base = resolve_model_path(config.paths.planner_model, config.paths.cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(config.paths.planner_tokenizer or base)
    rows = [tokenize_example(e, tokenizer, t.max_prompt_length) for e in examples]
    dataset = Dataset.from_list(rows)
    work = out / "trainer"
    start_from = base
    if t.attention_window:
        # the verl job runs the planner attending to its last N tokens; SFT trains that architecture, so the
        # warm-started model acts in the job as it did here (a full-attention SFT model, windowed only in the job,
        # lost the start of its prompt while writing: reward 0.164 -> 0.063 on the same 64 episodes, 2026-11-28)
        from graph_planner.models.attention_window import windowed_model_dir

        start_from = str(windowed_model_dir(base, t.attention_window, work / "windowed_base"))
    model = load_causal_lm(start_from, dtype=torch.float32)
    args = TRLSFTConfig(
        output_dir=str(work), num_train_epochs=sft.epochs, max_steps=sft.max_steps,
        per_device_train_batch_size=sft.batch_size, learning_rate=sft.lr, lr_scheduler_type="constant",
        warmup_steps=0, weight_decay=0.0, logging_steps=max(1, math.ceil(len(rows) / sft.batch_size)),
        save_strategy="no", report_to=[], seed=config.experiment.seed, data_seed=config.experiment.seed,
        completion_only_loss=True, max_length=None, packing=False, bf16=t.precision == "bf16",
        use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    trainer.remove_callback(PrinterCallback)  # its raw dicts on stdout -> one log line per epoch instead
    trainer.add_callback(_epoch_log_callback(progress or log.info))
    result = trainer.train()
    model_dir = out / MODEL_DIR
    if model_dir.exists():
        shutil.rmtree(model_dir)
    trainer.model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    shutil.rmtree(work, ignore_errors=True)
    summary: dict[str, Any] = {"base_model": base, "source": sft.source, **counts,
                               "train_loss": float(result.training_loss), "steps": int(result.global_step),
                               "epochs": sft.epochs, "lr": sft.lr, "seconds": round(time.monotonic() - started, 2)}
    atomic_write_text(out / "sft.json", json.dumps(summary, indent=2))
    log.info("SFT warm start: %d example(s) from %d/%d episode(s), loss %.3f, %d step(s) -> %s", counts["examples"],
             counts["episodes_kept"], counts["episodes"], summary["train_loss"], summary["steps"], model_dir)
    return SFTResult(model_dir, counts["examples"], counts["episodes"], counts["episodes_kept"],
                     summary["train_loss"], summary["seconds"])
