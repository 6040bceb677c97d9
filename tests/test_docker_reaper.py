"""The reaper on the real engine: containers of a SIGKILLed run are removed by `gp sandbox reap`, a SIGTERMed
run removes its own, live runs are never touched; owner liveness survives pid recycling."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from docker_fixtures import (  # noqa: F401 - pytest fixtures
    base_image,
    docker_client,
    docker_config,
    tiny_dataset,
    tiny_task,
)
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.sandbox.docker import DockerSandbox
from graph_planner.sandbox.reaper import (
    LABEL_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_RUN,
    owner_is_dead,
    owner_labels,
    reap,
)

HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from docker_fixtures import docker_config, tiny_task
    from graph_planner.sandbox.docker import DockerSandbox
    boxes = [DockerSandbox(tiny_task(task_id=f"held-{{i}}"), docker_config().sandbox, {dataset!r}, run_id={run!r})
             for i in range(3)]
    for box in boxes:
        box.start()
    print("ready", flush=True)
    time.sleep(600)
""")


def containers_of(client, run_id: str) -> list:
    return client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})


def start_holder(dataset: Path, run_id: str) -> subprocess.Popen[str]:
    code = HOLDER.format(tests=str(Path(__file__).parent), dataset=str(dataset), run=run_id)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        pytest.fail(f"holder process did not start its containers: {proc.stderr.read()[-2000:]}")
    return proc


@pytest.mark.docker
def test_sigkilled_run_leaves_containers_that_gp_sandbox_reap_removes(docker_client, tiny_dataset):  # noqa: F811
    run_id = f"reap-{uuid.uuid4().hex[:8]}"
    proc = start_holder(tiny_dataset, run_id)
    assert len(containers_of(docker_client, run_id)) == 3
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(containers_of(docker_client, run_id)) == 3, "SIGKILL gives the run no chance to clean up"

    result = CliRunner().invoke(app, ["sandbox", "reap"])
    assert result.exit_code == 0, result.output
    assert containers_of(docker_client, run_id) == []


@pytest.mark.docker
def test_sigterm_makes_a_run_remove_its_own_containers(docker_client, tiny_dataset):  # noqa: F811
    run_id = f"term-{uuid.uuid4().hex[:8]}"
    proc = start_holder(tiny_dataset, run_id)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM, "the default SIGTERM action still ends the process"
    assert containers_of(docker_client, run_id) == []


@pytest.mark.docker
def test_containers_of_live_runs_are_kept_unless_their_run_is_named(docker_client, tiny_dataset):  # noqa: F811
    run_id = f"live-{uuid.uuid4().hex[:8]}"
    box = DockerSandbox(tiny_task(), docker_config().sandbox, tiny_dataset, run_id=run_id, client=docker_client)
    box.start()
    try:
        name = box.container.name
        assert name not in reap(docker_client).removed
        assert name in reap(docker_client, owner_pid=os.getpid(), dry_run=True).removed, "exit hook's selection"
        assert name not in reap(docker_client, owner_pid=os.getpid() + 1, dry_run=True).removed
        assert len(containers_of(docker_client, run_id)) == 1
        assert reap(docker_client, run_id=run_id).removed == [name]
        assert containers_of(docker_client, run_id) == []
    finally:
        box.close()


def test_owner_liveness_from_labels():
    mine = owner_labels("r", "t")
    assert not owner_is_dead(mine)
    assert owner_is_dead({**mine, LABEL_OWNER_START: "1"}), "a recycled pid is not the owner"
    assert not owner_is_dead({**mine, LABEL_HOST: socket.gethostname() + "-elsewhere"}), "never judge other hosts"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    assert owner_is_dead({**mine, LABEL_OWNER_PID: dead.stdout.strip()})
    assert mine[LABEL_OWNER_PID] == str(os.getpid())
