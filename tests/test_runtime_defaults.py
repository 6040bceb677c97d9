"""Runtime defaults the package sets before torch loads (graph_planner/__init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys


def _policy_seen_by_torch_process(env: dict[str, str]) -> str:
    code = ("import graph_planner, os, torch; torch.set_num_threads(2); torch.ones(64, 64) @ torch.ones(64, 64); "
            "print(os.environ.get('OMP_WAIT_POLICY'))")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          timeout=120).stdout.strip()


def test_openmp_threads_wait_passively_unless_the_user_says_otherwise():
    """A torch thread waiting for its peer must not spin on a core that sandboxes and Ray actors need; a user who
    wants spinning (a dedicated machine) keeps their setting."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert _policy_seen_by_torch_process(env) == "PASSIVE"
    assert _policy_seen_by_torch_process({**env, "OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE"
