"""Regenerate configs/defaults.yaml from the schema (tests/test_config.py checks they agree)."""

from pathlib import Path

import yaml

from graph_planner.config.loader import config_to_dict
from graph_planner.config.schema import RunConfig

HEADER = ("# Built-in defaults of the run config (graph_planner/config/schema.py); tests keep this file in sync.\n"
          "# Regenerate with: .venv/bin/python scripts/regen-defaults.py\n"
          "# Precedence: these defaults < --config-file YAML < CLI flags (unless --yaml-only).\n")

data = config_to_dict(RunConfig())
data.pop("resolved_run_dir")
data.pop("resolved_config_path")
path = Path(__file__).resolve().parents[1] / "configs" / "defaults.yaml"
path.write_text(HEADER + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
print(path)
