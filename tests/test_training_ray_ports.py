"""The ports a private Ray head is given: distinct (a CI run failed when the GCS and the dashboard were both given
41883: each port was chosen by binding and closing a socket, and the kernel handed the same one back)."""

from __future__ import annotations

from graph_planner.training.ray import head as head_module
from graph_planner.training.ray.head import PORT_FLAGS, LocalRayHead, free_ports


def test_free_ports_are_distinct_even_when_asked_for_many():
    ports = free_ports(64)
    assert len(set(ports)) == 64 and all(port > 0 for port in ports)


def test_every_port_flag_of_the_head_command_gets_its_own_port(tmp_path):
    head = LocalRayHead(num_cpus=4, num_gpus=1, log_path=tmp_path / "ray_head.log")
    try:
        cmd = head.command()
        given = {flag: int(cmd[cmd.index(flag) + 1]) for flag in PORT_FLAGS}
        assert len(set(given.values())) == len(PORT_FLAGS), given
        assert given["--port"] == head.gcs_port and given["--dashboard-port"] == head.dashboard_port
        assert head.dashboard_url == f"http://127.0.0.1:{head.dashboard_port}"
    finally:
        head.auth.remove()


def test_ports_the_caller_gives_are_kept_and_never_handed_out_again(tmp_path, monkeypatch):
    real = free_ports
    calls = iter([[5001, 5002] + real(len(PORT_FLAGS))])  # the chooser offers the given ports first
    monkeypatch.setattr(head_module, "free_ports", lambda n: next(calls))
    head = LocalRayHead(num_cpus=4, num_gpus=1, log_path=tmp_path / "ray_head.log", gcs_port=5001,
                        dashboard_port=5002)
    try:
        assert head.ports["--port"] == 5001 and head.ports["--dashboard-port"] == 5002
        assert len(set(head.ports.values())) == len(PORT_FLAGS)
    finally:
        head.auth.remove()
