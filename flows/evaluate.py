"""evaluate: prepare the data (cached after the first run) -> run the policy on the eval split and grade it ->
publish the report (the ``nightly-eval`` deployment)."""

from __future__ import annotations

from prefect import flow

from flows import DEFAULT_CONFIG
from tasks.config import resolve_config
from tasks.data import download_and_normalise
from tasks.evaluation import evaluate_checkpoint, publish_report


@flow(name="evaluate")
def evaluate(
    config_path: str = DEFAULT_CONFIG,
    overrides: list[str] = [],  # noqa: B006 - never mutated
    dataset: str | None = None,
    limit: int | None = None,
    model: str | None = None,
) -> str:
    """Evaluate ``model`` (default: paths.planner_model) on ``dataset`` (default: paths.dataset_eval), at most
    ``limit`` tasks; returns the report path.

    Args:
        config_path: Run config YAML, relative to the project root (configs/experiments/*.yaml).
        overrides: Dotted config overrides applied on top of the YAML, e.g. eval.batch_size=4.
        dataset: TaskRecord JSONL or prepared dataset dir to evaluate on (default: the config's paths.dataset_eval,
            which is prepared/sample/swebench/test.jsonl in configs/experiments/local_debug.yaml).
        limit: Evaluate only the first N tasks (default: the config's eval.limit, which is 4 in
            configs/experiments/local_debug.yaml; null there means every task).
        model: Planner checkpoint dir, HF model id or 'toy' (default: the config's paths.planner_model, which is
            toy in configs/experiments/local_debug.yaml).
    """
    config_file = resolve_config(config_path, overrides,
                                 {"paths.dataset_eval": dataset, "eval.limit": limit, "paths.planner_model": model})
    download_and_normalise(config_file)  # the eval split must exist (a cache hit after the first run)
    return publish_report(config_file, evaluate_checkpoint(config_file))
