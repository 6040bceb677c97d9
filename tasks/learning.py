"""The steps around GRPO that make learning visible: the trajectory SFT warm start before it (when
``training.sft.enabled``) and the before/after comparison of base, SFT and GRPO models after it.

Both are cached like training (same config keys, library source and input file contents), so a second demo run
re-executes neither.
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task

from graph_planner.config.paths import run_paths
from tasks.caching import InputFileContents, step_cache
from tasks.config import load_resolved

_CACHE = step_cache("train", ("graph_planner",), InputFileContents(exclude=("config_file",)))


@task(name="sft-warm-start", persist_result=True, cache_policy=_CACHE)
def sft_warm_start(config_file: str, registry: str) -> str:
    """Fine-tune ``paths.planner_model`` on trajectories; return the HF model dir ('' when SFT is disabled)."""
    from graph_planner.training.sft.trainer import run_sft

    config = load_resolved(config_file)
    if not config.training.sft.enabled:
        return ""
    result = run_sft(config, progress=get_run_logger().info)
    get_run_logger().info("SFT warm start: %d example(s) from %d/%d episode(s), loss %.3f -> %s", result.examples,
                          result.episodes_kept, result.episodes, result.train_loss, result.model_dir)
    return str(result.model_dir)


def _is_model_dir(checkpoint: str) -> bool:
    """Both engines' final model is an HF dir (local: the checkpoint's model; verl: ``.../actor/huggingface``)."""
    from graph_planner.config.checkpoints import MODEL_DIR
    from graph_planner.config.model_paths import MODEL_FILES

    return any((Path(checkpoint) / sub / name).is_file() for sub in ("", MODEL_DIR) for name in MODEL_FILES)


@task(name="learning-report", persist_result=True, cache_policy=_CACHE)
def learning_report(config_file: str, warm_start: str, checkpoint: str) -> str:
    """Base vs SFT vs GRPO on the training and val tasks; return the dir holding learning.json / learning.md."""
    from graph_planner.training.learning_report import compare_stages, summary_lines
    from graph_planner.training.local.rollout import training_data_path

    config = load_resolved(config_file)
    if not _is_model_dir(checkpoint):  # a verl run whose save_contents has no hf_model: nothing HF can load
        get_run_logger().warning("learning report skipped: %s is no HF model dir (verl: add hf_model to "
                                 "actor.checkpoint.save_contents)", checkpoint)
        return ""
    stages = {"base": config.paths.planner_model}
    if warm_start:
        stages["sft"] = warm_start
    stages["grpo"] = checkpoint
    splits = {"train": str(training_data_path(config.paths))}
    val = Path(config.paths.dataset_val or Path(config.paths.data_dir) / "val.jsonl")
    if val.exists():
        splits["val"] = str(val)
    test = Path(config.paths.dataset_eval or "")
    if test.is_file() and test.parent.resolve() == Path(splits["train"]).parent.resolve():
        splits["test"] = str(test)  # the test split of the training source (synth: held-out code locations)
    out = run_paths(config).learning
    report = compare_stages(config, stages, splits, out, config.eval.compare_episodes_per_task,
                            progress=get_run_logger().info)
    for line in summary_lines(report):
        get_run_logger().info("%s", line)
    return str(out)
