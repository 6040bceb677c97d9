"""Cache keys come from the config's own declarations; seed key names still load; one precedence for the sandbox
backend and the step budget (CLI > task > config)."""

from __future__ import annotations

import pytest
import yaml
from pydantic import Field

from graph_planner.config.cache_keys import stage_keys, undeclared_fields, walk_fields
from graph_planner.config.loader import ConfigError, load_run_config
from graph_planner.config.schema import RunConfig, Section
from graph_planner.env.planner_env import step_budget
from graph_planner.env.samples import sample_task
from graph_planner.sandbox.factory import backend_for


def test_every_run_config_field_declares_what_it_affects():
    """Adding a config field without an ``affects`` declaration (section or field) fails here."""
    assert undeclared_fields() == []


def test_an_undeclared_field_is_reported():
    class Partly(Section):
        field_affects = {"known": frozenset({"train"})}
        known: int = Field(1, description="declared")
        forgotten: int = Field(2, description="not declared")

    class Root(Section):
        field_affects = {"flag": frozenset({"eval"})}
        part: Partly = Field(default_factory=Partly)
        flag: bool = Field(False, description="declared")

    assert [(key, stages) for key, stages, _ in walk_fields(Root)] == [
        ("part.known", frozenset({"train"})), ("part.forgotten", None), ("flag", frozenset({"eval"}))]


def test_stage_keys_follow_the_declarations():
    train, evaluation, data = stage_keys("train"), stage_keys("eval"), stage_keys("data")
    assert "training.lr" in train.keys and "training.lr" not in evaluation.keys
    assert "eval.limit" in evaluation.keys and "eval.limit" not in train.keys
    assert "logging.output_dir" in evaluation.keys and "logging.level" not in evaluation.keys
    assert "data.r2e_limit" in data.keys and "data.dataset_name" not in data.keys
    assert stage_keys("register").keys == ("data.dataset_name",)
    assert stage_keys("manifest").files == ("images.manifest",)
    assert "training.resume_from" in train.files and "paths.dataset_eval" in evaluation.files
    assert not any(key.startswith("telemetry.") for stage in ("data", "train", "eval")
                   for key in stage_keys(stage).keys)


def test_seed_key_names_load_into_their_sections(tmp_path):
    direct = RunConfig.model_validate({"env": {"prepull_containers": True, "env_groups": 2, "max_steps": 5}})
    assert (direct.images.prepull, direct.training.env_groups, direct.env.max_steps) == (True, 2, 5)
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump({"env": {"docker_manifest": "m.txt", "prepull_max_workers": 32}}))
    config = load_run_config(path, cli_overrides={"env.max_traj_per_env": 3, "images.prepull_retries": 7})
    assert config.images.manifest == "m.txt" and config.images.prepull_max_workers == 32
    assert config.training.max_traj_per_env == 3 and config.images.prepull_retries == 7
    # the CLI's new name wins over the file's seed name (defaults < YAML < CLI holds across spellings)
    assert load_run_config(path, cli_overrides={"images.manifest": "cli.txt"}).images.manifest == "cli.txt"


def test_seed_and_new_name_with_different_values_is_an_error(tmp_path):
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump({"env": {"env_groups": 2}, "training": {"env_groups": 3}}))
    with pytest.raises(ConfigError, match=r"env\.env_groups .*training\.env_groups"):
        load_run_config(path)


def test_sandbox_backend_precedence_is_cli_then_task_then_config():
    task = sample_task("graphplanner-samples__textkit-11")
    config = RunConfig.model_validate({"backends": {"sandbox": "docker"}})
    assert backend_for(task, config) == "docker"
    on_task = task.model_copy(update={"backend": "r2egym"})
    assert backend_for(on_task, config) == "r2egym"
    config.backends.sandbox_override = "local"  # what --sandbox local sets
    assert backend_for(on_task, config) == "local"
    assert backend_for(on_task, config, explicit="docker") == "docker"


def test_step_budget_is_cli_then_task_cap_over_config():
    task = sample_task("graphplanner-samples__textkit-11").model_copy(update={"max_steps": 5})
    assert step_budget(task, 8) == 5  # the task caps
    assert step_budget(task, 3) == 3  # the run's budget
    assert step_budget(task, RunConfig().env.max_steps, explicit=12) == 12  # --max-steps wins
