"""Run configuration: schema, loader (defaults < YAML < CLI), preflight."""

from graph_planner.config.loader import ConfigError, config_to_dict, load_run_config, write_resolved_config
from graph_planner.config.preflight import preflight_check
from graph_planner.config.schema import RunConfig

__all__ = ["ConfigError", "RunConfig", "config_to_dict", "load_run_config", "preflight_check",
           "write_resolved_config"]
