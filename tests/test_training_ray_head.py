"""The private local Ray head (graph_planner.training.ray.head) when it cannot start: a clear error naming its log,
and nothing of it left behind (no process naming its temp dir, no temp dir)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from graph_planner.training.ray.head import LocalRayHead, RayHeadError

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_head_that_cannot_start_names_its_log_and_leaves_no_process(tmp_path, monkeypatch):
    # Ray's own waits for a GCS that answers (5 s + 5 s + 30 s by default) are cut short: here it exits at once
    monkeypatch.setenv("RAY_gcs_rpc_server_connect_timeout_s", "1")
    monkeypatch.setenv("RAY_py_gcs_connect_timeout_s", "2")
    with socket.socket() as taken:  # its GCS port is already in use
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        head = LocalRayHead(num_cpus=4, num_gpus=1, log_path=tmp_path / "ray_head.log",
                            gcs_port=taken.getsockname()[1])
        with pytest.raises(RayHeadError) as err:
            head.start(timeout_s=150)
    assert f"see its log {tmp_path / 'ray_head.log'}" in str(err.value)
    assert head.own_pids() == [] and not head.temp_dir.exists()
    assert Path(tmp_path / "ray_head.log").stat().st_size > 0


def test_a_head_whose_chosen_ports_clash_starts_again_on_new_ones(tmp_path, monkeypatch):
    from graph_planner.training.ray import head as head_module

    real = head_module.free_ports
    clash = real(1)[0]
    offers = iter([[clash] * len(head_module.PORT_FLAGS)])  # the first choice gives every component one port
    monkeypatch.setattr(head_module, "free_ports", lambda n: next(offers, None) or real(n))
    head = LocalRayHead(num_cpus=4, num_gpus=1, log_path=tmp_path / "ray_head.log")
    first_temp_dir = head.temp_dir
    with head.start(timeout_s=150):
        assert len(set(head.ports.values())) == len(head_module.PORT_FLAGS)
        head.client().list_jobs()
    log = (tmp_path / "ray_head.log").read_text(errors="replace")
    assert "used by other components" in log  # the clash really happened, and Ray refused it
    assert head.own_pids() == [] and not head.temp_dir.exists() and not first_temp_dir.exists()
