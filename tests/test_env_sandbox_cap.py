"""The sandbox cap (``parallel.workflow_parallel``) is taken where every runner builds its episode
(env/assembly.py): however many threads open envs at once, at most k real sandboxes are open, and a sandbox
frees its slot when it closes or fails to start."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_sandbox_local_fixtures import make_calc_repo, swebench_task

from graph_planner.config.schema import RunConfig
from graph_planner.env.assembly import open_env, sandbox_slots
from graph_planner.sandbox import SandboxError

CAP = 2
OPENERS = 6


def capped_config(tmp_path, cap: int = CAP) -> RunConfig:
    return RunConfig.model_validate({
        "experiment": {"run_name": f"cap-{tmp_path.name}"}, "logging": {"output_dir": str(tmp_path / "runs")},
        "paths": {"cache_dir": str(tmp_path / "cache")},
        "parallel": {"parallel_agents": cap, "workflow_parallel": cap},
        "sandbox": {"exec_timeout": 30.0, "test_timeout": 60.0}})


def test_concurrent_open_env_calls_never_hold_more_sandboxes_than_the_cap(tmp_path):
    _, gold, test_patch = make_calc_repo(tmp_path)
    task = swebench_task(tmp_path, gold, test_patch)
    config = capped_config(tmp_path)
    lock = threading.Lock()
    inside: list[int] = [0]
    most: list[int] = [0]
    # CAP openers at a time must meet here (a cap below CAP would time the barrier out)
    together = threading.Barrier(CAP, timeout=60)
    all_called = threading.Barrier(OPENERS, timeout=60)

    def episode(i: int) -> str:
        all_called.wait()  # every opener calls open_env at once
        with open_env(task, config, tmp_path, f"cap-test-{i}") as env:
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            # an open sandbox holds one of the CAP lock-file slots, so no more than CAP can be open
            assert env.sandbox.slot is not None and env.sandbox.slot.held
            assert sandbox_slots(config).held_count() <= CAP
            together.wait()
            root = env.sandbox.where
            with lock:
                inside[0] -= 1
        assert env.sandbox.slot is None  # freed by close
        return root

    with ThreadPoolExecutor(max_workers=OPENERS) as pool:
        roots = list(pool.map(episode, range(OPENERS)))
    assert most[0] == CAP, f"{most[0]} sandboxes were open at once with workflow_parallel={CAP}"
    assert len(set(roots)) == OPENERS  # each opener had its own real sandbox
    assert sandbox_slots(config).held_count() == 0


def test_a_sandbox_that_fails_to_start_frees_its_slot(tmp_path):
    task = swebench_task(tmp_path, "", "", repo_path="repos/missing")
    config = capped_config(tmp_path, cap=1)
    for _ in range(2):  # with the slot leaked, the second try would wait forever
        with pytest.raises(SandboxError), open_env(task, config, tmp_path, "cap-test-missing"):
            pass
    assert sandbox_slots(config).held_count() == 0
