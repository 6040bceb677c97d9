"""pipeline: the whole DAG, one task per step (each step is one hop from its graph_planner function):

    download + normalise -> docker manifest -> parallel prepull -> dataset registration
      -> preflight -> [trajectory SFT warm start] -> GRPO training (local or Ray job) -> SWE-bench style eval
      -> [local backend: base / SFT / GRPO compared on the train and val tasks] -> report artifacts
"""

from __future__ import annotations

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows import DEFAULT_CONFIG
from flows.prepare_data import prepare
from tasks.config import load_resolved, resolve_config
from tasks.evaluation import evaluate_checkpoint, publish_report
from tasks.learning import learning_report, sft_warm_start
from tasks.preflight import preflight
from tasks.training import run_training


@flow(name="pipeline", task_runner=ThreadPoolTaskRunner(max_workers=8))
def pipeline(config_path: str = DEFAULT_CONFIG, overrides: list[str] = []) -> str:  # noqa: B006 - never mutated
    """Prepare data, train, evaluate the trained checkpoint; returns the report path.

    Args:
        config_path: Run config YAML, relative to the project root (configs/experiments/*.yaml).
        overrides: Dotted config overrides applied on top of the YAML, e.g. training.total_steps=1 or
            eval.limit=2; an unknown key fails the run with the closest real keys in its message.
    """
    config_file = resolve_config(config_path, overrides)
    registry = prepare(config_file)  # download + normalise -> manifest -> prepull -> register
    checked = preflight(config_file)
    config = load_resolved(checked)
    warm_start = sft_warm_start(checked, registry) if config.training.sft.enabled else ""
    checkpoint = run_training(checked, registry, warm_start)
    learning = learning_report(checked, warm_start, checkpoint) if config.eval.compare_stages else ""
    return publish_report(config_file, evaluate_checkpoint(config_file, checkpoint), checkpoint, learning)
