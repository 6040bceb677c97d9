"""Prepull against a real registry on 127.0.0.1: images pushed there and removed locally come back; a registry
that stops mid-run gives retries then failures with reasons and a non-zero CLI exit; once it is back a rerun
pulls only what is still missing. Images this project builds (`gp images build`) are never pulled: checked on a
fake docker client, no engine needed."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from types import SimpleNamespace
from typing import Any

import docker.errors
import pytest
from docker_fixtures import (  # noqa: F401 - pytest fixtures
    docker_client,
    own_registry,
    remove_images,
    test_registry,
    tiny_image,
)
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.data.manifest import read_manifest
from graph_planner.data.record import BUILT_HERE_HINT
from graph_planner.sandbox import prepull
from graph_planner.sandbox.prepull import prepull_images


def push(client, image: str) -> None:
    repository, _, tag = image.rpartition(":")
    for event in client.images.push(repository, tag=tag, stream=True, decode=True):
        assert "error" not in event, f"push of {image} failed: {event}"


def pushed_images(client, registry: str, count: int) -> list[str]:
    """``count`` distinct tiny images in ``registry``, absent locally."""
    tag = uuid.uuid4().hex[:10]
    images = [f"{registry}/gp-prepull/img{i}:{tag}" for i in range(count)]
    for i, image in enumerate(images):
        tiny_image(client, image, f"{tag}-{i}")
        push(client, image)
    remove_images(client, images)
    return images


def present(client, image: str) -> bool:
    return any(image in img.tags for img in client.images.list())


@pytest.mark.docker
def test_prepull_pulls_what_is_missing_and_skips_what_is_present(docker_client, test_registry):  # noqa: F811
    images = pushed_images(docker_client, test_registry, 3)
    try:
        assert not any(present(docker_client, image) for image in images)
        report = prepull_images(images, max_workers=3, retries=1, delay=0.1, timeout=60, client=docker_client)
        assert [r.status for r in report.results] == ["pulled"] * 3 and report.ok
        assert all(present(docker_client, image) for image in images)
        again = prepull_images(images, max_workers=3, retries=1, delay=0.1, timeout=60, client=docker_client)
        assert [r.status for r in again.results] == ["present"] * 3
    finally:
        remove_images(docker_client, images)


@pytest.mark.docker
def test_registry_stopped_mid_run_then_back(docker_client, own_registry, tmp_path):  # noqa: F811
    images = pushed_images(docker_client, own_registry.address, 3)
    events: list[tuple[str, str]] = []

    def stop_registry_after_first_pull(image: str, event: str, detail: str) -> None:
        events.append((image, event))
        if event == "pulled":
            own_registry.stop()

    try:
        report = prepull_images(images, max_workers=1, retries=2, delay=0.05, timeout=30,
                                progress=stop_registry_after_first_pull, client=docker_client)
        assert [r.status for r in report.results] == ["pulled", "failed", "failed"] and not report.ok
        for failed in report.results[1:]:
            assert failed.attempts == 3, "1 attempt + 2 retries"
            assert "connection refused" in failed.reason.lower() or "connect" in failed.reason.lower(), failed.reason
        assert sum(1 for _, event in events if event == "retry") == 4

        manifest = tmp_path / "docker_images.txt"
        manifest.write_text("# prepull test\n" + "\n".join(images) + "\n" + images[0] + "\n")
        assert read_manifest(manifest) == images
        args = ["images", "prepull", "--manifest", str(manifest), "--max-workers", "2", "--retries", "1",
                "--delay", "0.05", "--timeout", "20"]
        down = CliRunner().invoke(app, args)
        assert down.exit_code == 1, down.output
        assert not any(present(docker_client, image) for image in images[1:])

        own_registry.start()
        back = CliRunner().invoke(app, args)
        assert back.exit_code == 0, back.output
        assert "pulled 2, already present 1, failed 0" in " ".join(back.output.split())
        assert all(present(docker_client, image) for image in images)
    finally:
        remove_images(docker_client, images)


# --- images built here (`gp images build`) are never pulled: a fake docker client, no engine -----------------------

LOCAL_BUILT = "graph-planner-local/sweb.eval.x86_64.graphplanner-samples_1776_invcalc-1:latest"
SYNTH_BUILT = "graph-planner/synth-minicfg:0123456789ab"
FROM_REGISTRY = "registry.example/gp-prepull/img0:v1"


class FakeDockerClient:
    """docker-py's client as prepull uses it: ``images.get`` (present, or ImageNotFound) and ``api.pull``, which
    records each call and makes the image present."""

    def __init__(self, present: Iterable[str] = ()) -> None:
        self.present = set(present)
        self.pulls: list[str] = []
        self.images = SimpleNamespace(get=self._get)
        self.api = SimpleNamespace(pull=self._pull)

    def _get(self, name: str) -> object:
        if name not in self.present:
            raise docker.errors.ImageNotFound(f"No such image: {name}")
        return object()

    def _pull(self, repository: str, tag: str | None = None, **_: Any) -> Iterator[dict[str, str]]:
        image = f"{repository}:{tag}"
        self.pulls.append(image)
        self.present.add(image)
        return iter([{"status": "Pull complete"}])


def test_an_image_built_here_is_present_or_fails_at_once_with_the_build_hint_and_is_never_pulled() -> None:
    present = "graph-planner-local/sweb.eval.x86_64.graphplanner-samples_1776_minicfg-3:latest"
    client = FakeDockerClient(present=[present])
    events: list[tuple[str, str]] = []
    report = prepull_images([LOCAL_BUILT, SYNTH_BUILT, present, FROM_REGISTRY], max_workers=2, retries=3,
                            delay=30.0, timeout=5, client=client,
                            progress=lambda image, event, _detail: events.append((image, event)))
    # a retry would sleep 15-45 s: a built-here image retried would hang the test, not pass it
    assert client.pulls == [FROM_REGISTRY]  # no pull call for any image built here
    by_image = {r.image: r for r in report.results}
    for image in (LOCAL_BUILT, SYNTH_BUILT):
        assert by_image[image].status == "failed" and by_image[image].attempts == 0
        assert by_image[image].reason == BUILT_HERE_HINT
        assert [e for i, e in events if i == image] == ["failed"]  # no "pulling", no "retry"
    assert "built here, never pulled" in BUILT_HERE_HINT and "`gp images build <dataset dir>`" in BUILT_HERE_HINT
    assert by_image[present].status == "present"
    assert by_image[FROM_REGISTRY].status == "pulled" and not report.ok


def test_a_run_refuses_a_missing_image_built_here_naming_it_and_the_build_command(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gp train` / `gp eval` with images.prepull: the error names the image and says to build it."""
    client = FakeDockerClient()
    monkeypatch.setattr(prepull.docker, "from_env", lambda **_: client)
    manifest = tmp_path / "docker_images.txt"
    manifest.write_text(f"{LOCAL_BUILT}\n")
    images = SimpleNamespace(prepull=True, manifest=str(manifest), prepull_max_workers=2, prepull_retries=3,
                             prepull_delay=30.0, prepull_timeout=5.0)
    with pytest.raises(RuntimeError, match="gp images build") as failed:
        prepull.prepull_for_run(images, [tmp_path])
    assert LOCAL_BUILT in str(failed.value) and client.pulls == []


def test_an_episode_never_pulls_a_missing_image_built_here() -> None:
    """The sandbox's own pull at episode start (no prepull) refuses the same way, at once, naming the task."""
    from graph_planner.sandbox.base import SandboxError
    from graph_planner.sandbox.docker import DockerSandbox

    client = FakeDockerClient()
    pulled: list[str] = []
    client.images = SimpleNamespace(get=client._get, pull=lambda image, **_: pulled.append(image))
    box = SimpleNamespace(task=SimpleNamespace(task_id="samples__invcalc-1"))
    for image in (LOCAL_BUILT, SYNTH_BUILT):
        with pytest.raises(SandboxError, match="samples__invcalc-1.*built here, never pulled.*gp images build"):
            DockerSandbox._ensure_image(box, client, image)  # type: ignore[arg-type]
    assert pulled == []
    DockerSandbox._ensure_image(box, client, FROM_REGISTRY)  # type: ignore[arg-type]
    assert pulled == [FROM_REGISTRY]
