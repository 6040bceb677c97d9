"""Prepull throughput: N distinct images in a local registry (each with its own random layer of --size-mb),
pulled sequentially (1 worker) then in parallel (--workers), after removing them locally each time. Prints one
JSON object with both times and the speed-up. Needs a Docker engine (DOCKER_HOST) and `docker-registry`
(scripts/docker-up.sh installs both): a registry of its own is started on a free loopback port, in a temp dir
removed afterwards, so no benchmark blobs pile up anywhere.

    .venv/bin/python benchmarks/prepull.py [--images 8] [--workers 8] [--size-mb 8]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

from graph_planner.sandbox.docker import docker_client
from graph_planner.sandbox.prepull import prepull_images


def _answers(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _start_registry(root: Path) -> tuple[str, subprocess.Popen[bytes]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = root / "registry.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {root}/data\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not _answers(f"127.0.0.1:{port}"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("docker-registry did not start")
        time.sleep(0.1)
    return f"127.0.0.1:{port}", proc


def _image(client, tag: str, size_mb: int) -> None:
    """FROM scratch + one file of random bytes: a layer that really has to be transferred and extracted."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (("Dockerfile", b"FROM scratch\nCOPY blob /blob\n"), ("blob", os.urandom(size_mb << 20))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True)
    repository, _, version = tag.rpartition(":")
    for event in client.images.push(repository, tag=version, stream=True, decode=True):
        if "error" in event:
            raise SystemExit(f"push of {tag} failed: {event['error']}")


def _remove(client, images: list[str]) -> None:
    for image in images:
        client.images.remove(image, force=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--size-mb", type=int, default=8)
    args = parser.parse_args()
    client = docker_client()
    with tempfile.TemporaryDirectory(prefix="gp-bench-registry-") as tmp:
        registry, proc = _start_registry(Path(tmp))
        try:
            run = uuid.uuid4().hex[:8]
            images = [f"{registry}/gp-bench/prepull{i}:{run}" for i in range(args.images)]
            for image in images:
                _image(client, image, args.size_mb)
            _remove(client, images)
            sequential = prepull_images(images, max_workers=1, retries=0, client=client)
            _remove(client, images)
            parallel = prepull_images(images, max_workers=args.workers, retries=0, client=client)
            _remove(client, images)
        finally:
            proc.kill()
            proc.wait()
    ok = sequential.ok and parallel.ok
    print(json.dumps({
        "benchmark": "prepull",
        "images": args.images,
        "layer_mb": args.size_mb,
        "workers": args.workers,
        "sequential_s": round(sequential.seconds, 3),
        "parallel_s": round(parallel.seconds, 3),
        "speedup": round(sequential.seconds / parallel.seconds, 2) if parallel.seconds else None,
        "all_pulled": ok,
        "cpu_cores": os.cpu_count(),
    }, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
