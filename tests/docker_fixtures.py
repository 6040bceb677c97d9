"""Fixtures for tests that need the real Docker engine (scripts/docker-up.sh starts one here and prints the
DOCKER_HOST / GP_TEST_REGISTRY lines). Without an engine: under CI=true the tests FAIL (CI must run them),
elsewhere they skip with the reason. Import them into a test module: `from docker_fixtures import ...`."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BASE_IMAGE = "graph-planner/base:bookworm"
HOW_TO = "run `bash scripts/docker-up.sh` (as root) and `source .cache/docker/env.sh`"


def unavailable(reason: str) -> None:
    """Fail under CI (the docker tests must run there), skip elsewhere."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}; {HOW_TO}", pytrace=False)
    pytest.skip(f"{reason}; {HOW_TO}")


@pytest.fixture(scope="session")
def docker_client():
    import docker.errors  # also binds `docker`

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        unavailable(f"no Docker engine answers ({exc})")
    return client


@pytest.fixture(scope="session")
def base_image(docker_client) -> str:
    import docker.errors

    try:
        docker_client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        unavailable(f"the base image {BASE_IMAGE} is missing")
    return BASE_IMAGE


@pytest.fixture(scope="session")
def test_registry(docker_client) -> str:
    """host:port of the registry scripts/docker-up.sh started (GP_TEST_REGISTRY)."""
    address = os.environ.get("GP_TEST_REGISTRY", "")
    if not address:
        unavailable("GP_TEST_REGISTRY is not set")
    if not registry_answers(address):
        unavailable(f"no registry answers at {address} (GP_TEST_REGISTRY)")
    return address


def registry_answers(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LocalRegistry:
    """A `docker-registry serve` of the test's own, so a test can stop and restart it (fault injection)."""

    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        config = self.root / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {self.root / 'data'}\nhttp:\n  addr: {self.address}\n")
        log = open(self.root / "registry.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while not registry_answers(self.address):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"docker-registry did not start on {self.address}: "
                                   f"{(self.root / 'registry.log').read_text()[-800:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


@pytest.fixture
def own_registry(tmp_path: Path, docker_client) -> Iterator[LocalRegistry]:
    if shutil.which("docker-registry") is None:
        unavailable("docker-registry is not installed (apt-get install docker-registry)")
    registry = LocalRegistry(tmp_path / "registry", free_port())
    registry.root.mkdir()
    registry.start()
    try:
        yield registry
    finally:
        registry.stop()


def tiny_image(client, tag: str, payload: str) -> str:
    """A few-hundred-byte image (FROM scratch, one file) tagged ``tag``: cheap to push and pull."""
    import io
    import tarfile

    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (("Dockerfile", b"FROM scratch\nCOPY payload.txt /payload.txt\n"),
                           ("payload.txt", payload.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True)
    return tag


def remove_images(client, tags: list[str]) -> None:
    import docker.errors

    for tag in tags:
        try:
            client.images.remove(tag, force=True)
        except docker.errors.ImageNotFound:
            pass


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- a tiny task with its own image
TINY_FILES = {
    "conftest.py": "",
    "calc/__init__.py": "from calc.ops import add, mean\n",
    "calc/ops.py": "def add(a, b):\n    return a - b\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n",
    "tests/test_ops.py": ("from calc import add, mean\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                          "def test_mean():\n    assert mean([1, 2, 3]) == 2\n"),
    "tools/run.sh": "#!/bin/sh\necho run\n",
}
TINY_GOLD = """diff --git a/calc/ops.py b/calc/ops.py
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -1,5 +1,5 @@
 def add(a, b):
-    return a - b
+    return a + b
 
 
 def mean(xs):
"""
TINY_IMAGE = "gp-test/tiny-calc:latest"


def write_tiny_repo(root: Path) -> Path:
    for rel, text in TINY_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "tools/run.sh").chmod(0o755)
    return root


def tiny_task(**overrides):
    from graph_planner.data.record import TaskRecord

    fields = {"task_id": "tiny__calc-1", "source": "custom", "split": "test", "repo": "tiny/calc",
              "problem_statement": "add(2, 3) returns -1", "image": TINY_IMAGE, "repo_path": "repos/calc",
              "test_files": ["tests/test_ops.py"], "fail_to_pass": ["tests/test_ops.py::test_add"],
              "pass_to_pass": ["tests/test_ops.py::test_mean"], "gold_patch": TINY_GOLD}
    fields.update(overrides)
    return TaskRecord(**fields)


def docker_config(**sandbox):
    from graph_planner.config.schema import RunConfig

    settings = {"cpus": 1.0, "memory": "512m", "pids_limit": 256, "exec_timeout": 60.0, "test_timeout": 120.0}
    settings.update(sandbox)
    return RunConfig.model_validate({"backends": {"sandbox": "docker"}, "sandbox": settings})


@pytest.fixture(scope="session")
def tiny_dataset(docker_client, base_image, tmp_path_factory) -> Path:
    """A dataset dir with repos/calc whose image TINY_IMAGE is built (cached by source digest)."""
    from graph_planner.sandbox.images import build_sample_images

    root = tmp_path_factory.mktemp("tiny-dataset")
    write_tiny_repo(root / "repos" / "calc")
    [result] = build_sample_images([tiny_task()], root, client=docker_client)
    assert result.status in ("built", "cached"), result.reason
    return root
