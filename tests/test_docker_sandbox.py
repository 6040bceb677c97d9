"""DockerSandbox on the real engine: persistent shell, timeouts that kill, no network, limits and labels,
exact snapshot/restore, file transfer, grading in the container."""

from __future__ import annotations

import os
import socket
import time

import pytest
from docker_fixtures import (  # noqa: F401 - pytest fixtures
    base_image,
    docker_client,
    docker_config,
    tiny_dataset,
    tiny_task,
)

from graph_planner.sandbox.base import SandboxError
from graph_planner.sandbox.docker import MAX_INLINE_SCRIPT, DockerSandbox
from graph_planner.sandbox.reaper import LABEL_HOST, LABEL_OWNER_PID, LABEL_RUN, LABEL_TASK

pytestmark = pytest.mark.docker

TREE_STATE = ("git ls-files -s --cached --others --exclude-standard | sort; "
              "find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum; "
              "find . -path ./.git -prune -o -type f -printf '%m %p\\n' | sort")


@pytest.fixture
def sandbox(docker_client, tiny_dataset):  # noqa: F811
    box = DockerSandbox(tiny_task(), docker_config().sandbox, tiny_dataset, run_id="test-docker", client=docker_client)
    box.start()
    try:
        yield box
    finally:
        box.close()


def test_exec_returns_stdout_stderr_and_exit_code(sandbox):
    res = sandbox.exec("echo out; echo err >&2; pwd; exit 3")
    assert (res.rc, res.stdout, res.stderr, res.timed_out) == (3, "out\n/testbed\n", "err\n", False)
    assert sandbox.exec("printf 'no newline'").stdout == "no newline"
    assert sandbox.exec("cd calc && pwd").stdout == "/testbed/calc\n"
    assert sandbox.exec("pwd").stdout == "/testbed\n", "each command starts in the repo root"
    assert sandbox.exec("cat").stdout == "", "a command reading stdin gets EOF, not the protocol"


def test_command_past_its_timeout_is_killed_with_its_children(sandbox):
    res = sandbox.exec("sleep 300 & sleep 301; echo never", timeout=1)
    assert res.timed_out and res.rc == 124 and "never" not in res.stdout
    assert res.seconds < 10
    procs = sandbox.exec("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout
    assert "sleep 300" not in procs and "sleep 301" not in procs, procs
    assert sandbox.exec("echo alive").stdout == "alive\n", "the session survives a timeout"


def test_container_has_no_network(sandbox):
    assert sandbox.exec("ls /sys/class/net").stdout.split() == ["lo"]
    res = sandbox.exec("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\"")
    assert res.rc != 0 and ("unreachable" in res.stderr or "OSError" in res.stderr), res.stderr


def test_labels_and_resource_limits_come_from_run_and_config(sandbox, docker_client):  # noqa: F811
    container = docker_client.containers.get(sandbox.container.id)
    labels = container.labels
    assert labels[LABEL_RUN] == "test-docker" and labels[LABEL_TASK] == "tiny__calc-1"
    assert labels[LABEL_OWNER_PID] == str(os.getpid()) and labels[LABEL_HOST] == socket.gethostname()
    host = container.attrs["HostConfig"]
    assert host["NanoCpus"] == 1_000_000_000 and host["Memory"] == 512 * 1024 ** 2 and host["PidsLimit"] == 256
    assert container.attrs["Config"]["NetworkDisabled"] is True
    assert sandbox.exec("cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max").stdout \
        .strip() == "256"


def test_snapshot_edit_restore_returns_the_exact_tree(sandbox):
    before = sandbox.exec(TREE_STATE).stdout
    snap = sandbox.snapshot()
    sandbox.write_file("calc/ops.py", "def add(a, b):\n    return 0\n")
    sandbox.write_file("calc/new_module.py", "X = 1\n")
    sandbox.exec("rm tests/test_ops.py && chmod -x tools/run.sh && mkdir -p build/deep && touch build/deep/x")
    assert sandbox.exec(TREE_STATE).stdout != before
    sandbox.restore(snap)
    assert sandbox.exec(TREE_STATE).stdout == before


def test_file_transfer_is_byte_exact_and_keeps_modes(sandbox):
    text = "ünïcode ✓\r\nline two\n" + "x" * 300_000
    sandbox.write_file("data/big.txt", text)
    assert sandbox.read_file("data/big.txt") == text
    sandbox.write_file("tools/run.sh", "#!/bin/sh\necho changed\n")
    assert sandbox.exec("tools/run.sh").stdout == "changed\n", "an executable stays executable after a write"
    assert "old mode" not in sandbox.diff()
    with pytest.raises(SandboxError, match="no such file"):
        sandbox.read_file("calc/missing.py")


def test_long_command_and_large_output(sandbox):
    script = "cat <<'EOF' | wc -c\n" + "y" * (MAX_INLINE_SCRIPT + 5000) + "\nEOF\n"
    assert sandbox.exec(script).stdout.strip() == str(MAX_INLINE_SCRIPT + 5001)
    assert len(sandbox.exec("head -c 3000000 /dev/zero | tr '\\0' a").stdout) == 3_000_000


def test_tree_archive_reads_many_files_at_once(sandbox):
    files = sandbox.read_files(sandbox.list_files("**/*.py"))
    assert set(files) == {"conftest.py", "calc/__init__.py", "calc/ops.py", "tests/test_ops.py"}
    assert files["calc/ops.py"].startswith("def add(a, b):")


def test_session_lost_while_idle_is_restarted(sandbox):
    session = sandbox._session
    sandbox.container.exec_run(["sh", "-c", f"kill -9 {session.pid}"])
    # idle: the shell's end reaches our socket before the next command (a shell dying *during* a request is
    # reported as an error instead, since we cannot know whether the command ran)
    time.sleep(1.0)
    assert sandbox.exec("echo back").stdout == "back\n"
    assert sandbox._session is not session


def test_grading_runs_in_the_container(sandbox):
    base = sandbox.run_tests()
    assert not base.resolved and base.statuses["tests/test_ops.py::test_add"] == "FAILED"
    sandbox.apply_patch(tiny_task().gold_patch)
    gold = sandbox.run_tests()
    assert gold.resolved, gold.log_tail
    assert gold.fail_to_pass["success"] == ["tests/test_ops.py::test_add"]


def test_close_removes_the_container(docker_client, tiny_dataset):  # noqa: F811
    import docker.errors

    box = DockerSandbox(tiny_task(), docker_config().sandbox, tiny_dataset, run_id="test-docker", client=docker_client)
    with box:
        container_id = box.container.id
        assert box.base_commit
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(container_id)


def test_missing_image_is_a_clear_error(docker_client, tiny_dataset):  # noqa: F811
    task = tiny_task(image="127.0.0.1:9/graph-planner/absent:nope")
    with pytest.raises(SandboxError, match="absent:nope.*gp images"):
        DockerSandbox(task, docker_config().sandbox, tiny_dataset, run_id="test-docker", client=docker_client).start()


def test_a_command_printing_200_mib_returns_head_note_tail_and_the_session_answers_after(sandbox):
    """The session's read buffer keeps only head and tail (output_cap) of a task command; file reads stay whole."""
    import resource

    from graph_planner.sandbox.output_cap import command_output

    total = 200 * 1024 * 1024
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB: the peak so far
    res = sandbox.exec(f"yes | head -c {total}; echo done >&2")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 100, f"the test process grew by {grown_mib:.0f} MiB"
    cap = command_output()
    dropped = total - cap.head_bytes - cap.tail_bytes
    assert res.ok and res.stderr == "done\n"
    assert res.stdout == ("y\n" * (cap.head_bytes // 2) + f"\n[... {dropped} bytes of output dropped ...]\n"
                          + "y\n" * (cap.tail_bytes // 2))
    assert sandbox.exec("echo ok").stdout == "ok\n"
    size = cap.head_bytes + cap.tail_bytes + 1_000_000
    assert sandbox.exec(f"head -c {size} /dev/zero | tr '\\0' b > big.txt").ok
    assert sandbox.read_file("big.txt") == "b" * size, "file contents are not capped"
