"""Resolve the run config once per flow run: defaults < YAML < overrides, written as resolved_config.yaml.

Every later task takes the path of that file (never the config object), so cache keys can follow exactly the
config values each step reads (see :class:`tasks.caching.ConfigKeys`).
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from graph_planner.config.loader import (
    SECRET_PATHS,
    dump_config_yaml,
    load_run_config,
    parse_set_override,
    write_resolved_config,
)
from graph_planner.config.run_dirs import claim_run_dir
from graph_planner.config.schema import RunConfig
from graph_planner.telemetry.redact import is_secret_key
from tasks.artifacts import run_scope


def overrides_to_dict(overrides: list[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """``["a.b=1", ...]`` plus typed flow extras (None = not given) as dotted overrides; extras win."""
    merged = dict(parse_set_override(item) for item in overrides)
    merged.update({key: value for key, value in (extra or {}).items() if value is not None})
    secret = sorted(key for key in merged if key in SECRET_PATHS or is_secret_key(key.rsplit(".", 1)[-1]))
    if secret:
        # Prefect keeps flow parameters in its database in plain text (UI, API, run history)
        raise ValueError(f"{', '.join(secret)}: secrets may not be flow parameters (Prefect stores parameters in "
                         "plain text); set WANDB_API_KEY / HF_TOKEN / the *_api_key_env variables in the worker's "
                         "environment instead (for deployments: a Prefect Secret block exported as that variable "
                         "by the work pool's job template)")
    return merged


@task(name="resolve-config", cache_policy=NO_CACHE)
def resolve_config(config_path: str, overrides: list[str], extra: dict[str, Any] | None = None) -> str:
    """Merge and validate the run config, claim the run's directory (an unnamed run: a fresh ``<name>-<UTC
    stamp>``, recorded in the file, in no cache key), write ``<run dir>/resolved_config.yaml``, return its path."""
    config = load_run_config(config_path, cli_overrides=overrides_to_dict(overrides, extra))
    claim_run_dir(config)
    if config.logging.wandb.group is None:
        config.logging.wandb.group = flow_run_group()  # this flow run's W&B runs (train + eval) sit together
    path = write_resolved_config(config)
    text = dump_config_yaml(config)  # what was just written: secret-free by construction
    create_markdown_artifact(
        markdown=f"# Resolved config: {config.run_name}\n\n`{path}`\n\n```yaml\n{text}```\n",
        key=f"{run_scope(config.run_name)}-resolved-config", description=f"resolved config of {config.run_name}")
    return str(path)


def flow_run_group() -> str | None:
    """``<flow name>-<flow run name>`` (e.g. ``pipeline-giga-hare``) inside a flow run, else None."""
    from prefect.runtime import flow_run

    return f"{flow_run.flow_name}-{flow_run.name}" if flow_run.id else None


def load_resolved(config_file: str) -> RunConfig:
    """The run config a flow resolved (the file reloads to the same run)."""
    return load_run_config(config_file, yaml_only=True)
