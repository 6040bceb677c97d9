"""Backend selection: task.backend, else config; an unknown, absent or failing backend is an error, never a
silent fallback to another backend (the original implementation fell back to docker-py quietly)."""

from __future__ import annotations

import importlib.util

import pytest
from test_sandbox_local_fixtures import local_config, make_calc_repo, swebench_task

from graph_planner.config.schema import RunConfig
from graph_planner.sandbox import SandboxError, make_sandbox
from graph_planner.sandbox.local import LocalSandbox


@pytest.fixture()
def task(tmp_path):
    _, gold, test_patch = make_calc_repo(tmp_path)
    return swebench_task(tmp_path, gold, test_patch, image="gp-test/does-not-exist:latest")


def test_config_backend_is_used_and_task_backend_wins(tmp_path, task):
    assert isinstance(make_sandbox(task, local_config(), tmp_path), LocalSandbox)
    docker_config = RunConfig.model_validate({"backends": {"sandbox": "docker"}})
    assert isinstance(make_sandbox(task.model_copy(update={"backend": "local"}), docker_config, tmp_path), LocalSandbox)
    assert make_sandbox(task, docker_config, tmp_path).backend == "docker"


def test_unknown_backend_is_an_error(tmp_path, task):
    with pytest.raises(SandboxError, match="unknown sandbox backend 'podman'"):
        make_sandbox(task, local_config(), tmp_path, backend="podman")


def test_failing_docker_backend_raises_instead_of_falling_back_to_local(tmp_path, task, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # no engine answers there
    sandbox = make_sandbox(task, RunConfig.model_validate({"backends": {"sandbox": "docker"}}), tmp_path)
    with pytest.raises(SandboxError, match="Docker engine"):
        sandbox.start()
    assert not isinstance(sandbox, LocalSandbox)


@pytest.mark.skipif(importlib.util.find_spec("r2egym") is not None, reason="R2E-Gym is installed here")
def test_r2egym_backend_without_r2egym_fails_with_install_hint(tmp_path, task):
    with pytest.raises(SandboxError, match=r"backend r2egym needs R2E-Gym.*pip install -e"):
        make_sandbox(task, RunConfig.model_validate({"backends": {"sandbox": "r2egym"}}), tmp_path)
