"""Parallel image prepull before training/eval: images already present are skipped, the rest pulled by a thread
pool through docker-py with per-pull timeouts and exponential backoff with jitter; every image ends pulled,
present or failed with the reason (a run never starts on a half-pulled manifest without saying so). Images this
project builds itself (`gp images build`: ``graph-planner-local/...``, ``graph-planner/synth-...``) are in no
registry, so they are never pulled: present, or failed at once saying how to build them."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import docker.errors  # also binds `docker`
import requests
from docker.utils import parse_repository_tag

from graph_planner.data.manifest import read_manifest, resolve_manifest
from graph_planner.data.record import BUILT_HERE_HINT, built_here

log = logging.getLogger(__name__)

PullStatus = Literal["pulled", "present", "failed"]
#: Progress callback: (image, event, detail); events: "present", "pulling", "retry", "pulled", "failed".
ProgressCallback = Callable[[str, str, str], None]
#: Registry answers that no retry will change.
_PERMANENT = ("manifest unknown", "not found", "repository does not exist", "pull access denied",
              "invalid reference format", "unauthorized")


@dataclass
class PrepullResult:
    image: str
    status: PullStatus
    attempts: int = 0
    seconds: float = 0.0
    reason: str = ""


@dataclass
class PrepullReport:
    results: list[PrepullResult] = field(default_factory=list)
    seconds: float = 0.0

    def with_status(self, status: PullStatus) -> list[PrepullResult]:
        return [r for r in self.results if r.status == status]

    @property
    def ok(self) -> bool:
        return not self.with_status("failed")

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "seconds": round(self.seconds, 3),
                "counts": {s: len(self.with_status(s)) for s in ("pulled", "present", "failed")},
                "results": [r.__dict__ for r in self.results]}


def _is_present(client: docker.DockerClient, image: str) -> bool:
    try:
        client.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        return False


def _pull_once(client: docker.DockerClient, image: str, timeout: float) -> None:
    """One pull attempt; raises RuntimeError with the registry's/engine's reason."""
    repository, tag = parse_repository_tag(image)
    started = time.monotonic()
    stream = client.api.pull(repository, tag=tag or "latest", stream=True, decode=True)
    try:
        for event in stream:
            if "error" in event:
                raise RuntimeError(str(event.get("error")).strip())
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"pull did not finish within {timeout:g}s")
    finally:
        close = getattr(stream, "close", None)
        if callable(close):
            close()
    if not _is_present(client, image):
        raise RuntimeError("the engine reported the pull done but the image is not present")


def _backoff(delay: float, attempt: int) -> float:
    """delay * 2^(attempt-1), with +-50% jitter so parallel retries do not hit a registry in lockstep."""
    return delay * (2 ** (attempt - 1)) * random.uniform(0.5, 1.5)


def _pull_with_retries(client: docker.DockerClient, image: str, retries: int, delay: float, timeout: float,
                       progress: ProgressCallback) -> PrepullResult:
    started = time.monotonic()
    reason = ""
    attempts = 0
    for attempt in range(1, retries + 2):
        attempts = attempt
        progress(image, "pulling", f"attempt {attempt}/{retries + 1}")
        try:
            _pull_once(client, image, timeout)
            progress(image, "pulled", "")
            return PrepullResult(image, "pulled", attempt, time.monotonic() - started)
        except (docker.errors.DockerException, requests.RequestException, RuntimeError, TimeoutError,
                OSError) as exc:
            reason = " ".join(str(getattr(exc, "explanation", None) or exc).split())[:500]
            if any(marker in reason.lower() for marker in _PERMANENT):
                break
        if attempt <= retries:
            pause = _backoff(delay, attempt)
            progress(image, "retry", f"{reason} (retry in {pause:.1f}s)")
            time.sleep(pause)
    progress(image, "failed", reason)
    return PrepullResult(image, "failed", attempts, time.monotonic() - started, reason)


def prepull_images(images: Iterable[str], max_workers: int = 8, retries: int = 3, delay: float = 2.0,
                   timeout: float = 600.0, progress: ProgressCallback | None = None,
                   client: docker.DockerClient | None = None) -> PrepullReport:
    """Make every image present locally. ``retries`` extra attempts per image, ``delay`` seconds before the
    first retry (doubling, jittered), ``timeout`` seconds per pull attempt."""
    started = time.monotonic()
    names = list(dict.fromkeys(images))
    # one client shared by the workers: its connection pool must hold one connection per worker
    client = client or docker.from_env(timeout=int(max(timeout, 1)), max_pool_size=max(10, max_workers))
    lock = threading.Lock()

    def report(image: str, event: str, detail: str) -> None:
        log.debug("prepull %s: %s %s", image, event, detail)
        if progress is not None:
            with lock:
                progress(image, event, detail)

    by_name: dict[str, PrepullResult] = {}
    missing = []
    for name in names:
        if _is_present(client, name):
            by_name[name] = PrepullResult(name, "present")
            report(name, "present", "")
        elif built_here(name):
            by_name[name] = PrepullResult(name, "failed", reason=BUILT_HERE_HINT)
            report(name, "failed", BUILT_HERE_HINT)
        else:
            missing.append(name)
    if missing:
        with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(missing))),
                                thread_name_prefix="prepull") as pool:
            futures = {name: pool.submit(_pull_with_retries, client, name, retries, delay, timeout, report)
                       for name in missing}
            for name, future in futures.items():
                by_name[name] = future.result()
    return PrepullReport([by_name[name] for name in names], time.monotonic() - started)


def prepull_for_run(images_config: Any, datasets: Iterable[str | Path | None],
                    progress: ProgressCallback | None = None) -> PrepullReport | None:
    """``images.prepull`` (seed: ``--prepull-containers``) before a train / eval run: the manifest of each dataset
    (explicit ``images.manifest`` > ``<dataset dir>/docker_images.txt`` > collected from the dataset and written
    there), every image pulled with ``images.prepull_*``. None when prepull is off; a failed pull raises, naming
    the images, before any episode starts."""
    if not images_config.prepull:
        return None
    names: list[str] = []
    for dataset in datasets:
        if dataset is not None:
            names += read_manifest(resolve_manifest(images_config.manifest, dataset))
    try:
        report = prepull_images(names, images_config.prepull_max_workers, images_config.prepull_retries,
                                images_config.prepull_delay, images_config.prepull_timeout, progress)
    except docker.errors.DockerException as exc:
        raise RuntimeError(f"prepull (images.prepull / --prepull-containers): no Docker engine: {exc}") from exc
    failed = report.with_status("failed")
    if failed:
        raise RuntimeError("prepull failed (images.prepull / --prepull-containers): "
                           + "; ".join(f"{r.image}: {r.reason}" for r in failed))
    return report

