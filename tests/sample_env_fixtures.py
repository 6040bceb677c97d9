"""Fixtures for PlannerEnv tests on the bundled sample task textkit-7 with the real LocalSandbox and the real code
graph: one sandbox and one graph cache per test module (a sandbox start copies the repository), the tree reset to
the base before each env. A test module imports the fixtures it uses by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from graph_planner.codegraph import GraphCache
from graph_planner.config.schema import RunConfig
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.env.samples import sample_task
from graph_planner.models.synthesizers import NoSynthesizer
from graph_planner.sandbox.factory import make_sandbox

TASK_ID = "graphplanner-samples__textkit-7"
TARGET = "fn:textkit/wrap.py::truncate"


@pytest.fixture(scope="module")
def task():
    return sample_task(TASK_ID)


@pytest.fixture(scope="module")
def sandbox(task, request):
    run_id = "test-" + request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-")
    box = make_sandbox(task, RunConfig(), None, run_id)
    box.start()
    box.base_tree = box.snapshot()
    yield box
    box.close()


@pytest.fixture(scope="module")
def graph_cache(tmp_path_factory):
    return GraphCache(tmp_path_factory.mktemp("graphs"))


@pytest.fixture
def make_env(task, sandbox, graph_cache) -> Callable[..., PlannerEnv]:
    """``make_env(synthesizer=None, wrap=None, **env_settings)``: a PlannerEnv on the base tree; ``wrap`` turns
    the sandbox into what the env is given (a test double around the real one)."""
    sandbox.restore(sandbox.base_tree)

    def _make(synthesizer=None, wrap: Callable[[Any], Any] | None = None, **env_settings) -> PlannerEnv:
        config = RunConfig.model_validate({"env": env_settings})
        box = sandbox if wrap is None else wrap(sandbox)
        return PlannerEnv(task, box, config.env, synthesizer=synthesizer or NoSynthesizer(), graph_cache=graph_cache)

    return _make
