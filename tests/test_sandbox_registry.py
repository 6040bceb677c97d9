"""One sandbox registry: every backend name (and alias) resolves to its class in the factory, the run config,
the task record and the CLI alike; an unknown name is refused everywhere with the valid names listed."""

from __future__ import annotations

import importlib.util

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config.sandbox_names import SANDBOX_ALIASES, SANDBOX_NAMES, canonical_sandbox_name
from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.sandbox import SandboxError
from graph_planner.sandbox.factory import backend_for
from graph_planner.sandbox.registry import SANDBOX_CLASSES, sandbox_class


def test_the_name_type_and_the_class_map_list_the_same_backends():
    assert set(SANDBOX_CLASSES) == set(SANDBOX_NAMES)
    assert set(SANDBOX_ALIASES.values()) <= set(SANDBOX_NAMES)


@pytest.mark.parametrize("name", [*SANDBOX_NAMES, *SANDBOX_ALIASES])
def test_every_name_and_alias_resolves_to_its_class(name):
    canonical = canonical_sandbox_name(name)
    if canonical == "r2egym" and importlib.util.find_spec("r2egym") is None:
        # the class itself imports; only constructing it needs R2E-Gym (not on PyPI, not installed here)
        assert sandbox_class(name).__name__ == "R2EGymSandbox"
    else:
        assert sandbox_class(name).backend == canonical
    assert RunConfig.model_validate({"backends": {"sandbox": name}}).backends.sandbox == canonical
    task = TaskRecord(task_id="t", source="custom", split="test", repo="r", problem_statement="p", backend=name)
    assert task.backend == canonical and backend_for(task, RunConfig()) == canonical


def test_an_unknown_name_lists_the_valid_ones_everywhere():
    with pytest.raises(SandboxError) as raised:
        sandbox_class("podman")
    for name in (*SANDBOX_NAMES, *SANDBOX_ALIASES):
        assert name in str(raised.value)
    with pytest.raises(ValidationError, match="'local', 'docker' or 'r2egym'"):
        RunConfig.model_validate({"backends": {"sandbox": "podman"}})
    with pytest.raises(ValidationError, match="'local', 'docker' or 'r2egym'"):
        TaskRecord(task_id="t", source="custom", split="test", repo="r", problem_statement="p", backend="podman")
    task = TaskRecord(task_id="t", source="custom", split="test", repo="r", problem_statement="p")
    with pytest.raises(SandboxError, match=r"task t: unknown sandbox backend 'podman'; choose one of local, docker"):
        backend_for(task, RunConfig(), explicit="podman")


@pytest.mark.parametrize("command", [["smoke"], ["grade", "--dataset", "d", "--predictions", "p"],
                                     ["validate-tasks", "d"]])
def test_the_cli_sandbox_choices_are_the_registry(command):
    result = CliRunner().invoke(app, [*command, "--sandbox", "podman"])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "unknown sandbox backend 'podman'; choose one of local, docker, r2egym (repoenv = r2egym)" in text, text
