"""Preflight before any GPU work: the resource/parallelism rules of the run config (never cached: cheap, and the
cluster it describes may have changed)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from graph_planner.config.preflight import preflight_check
from tasks.config import load_resolved


@task(name="preflight", cache_policy=NO_CACHE)
def preflight(config_file: str) -> str:
    """Raise one ValueError naming every broken rule and the fixes; return the config file for the next step."""
    config = load_resolved(config_file)
    report = preflight_check(config)
    get_run_logger().info("preflight ok: %d GPU(s) across %d node(s), training backend %s", report.total_gpus,
                          config.resources.num_nodes, config.training.backend)
    return config_file
