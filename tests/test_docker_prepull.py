"""Prepull against a real registry on 127.0.0.1: images pushed there and removed locally come back; a registry
that stops mid-run gives retries then failures with reasons and a non-zero CLI exit; once it is back a rerun
pulls only what is still missing."""

from __future__ import annotations

import uuid

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
from graph_planner.sandbox.prepull import prepull_images

pytestmark = pytest.mark.docker


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
