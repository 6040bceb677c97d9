"""Parallel image prepull: one task per image (mapped on a thread pool), retried with backoff + jitter when the
docker engine or registry is unreachable. Pulls are side effects on the engine, so nothing is cached: an image
already present is skipped by :func:`graph_planner.sandbox.prepull.prepull_images` in milliseconds."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from graph_planner.data.manifest import read_manifest
from tasks.config import load_resolved
from tasks.retry import IO_RETRIES, IO_RETRY_DELAYS, IO_RETRY_JITTER, transient_only


@task(name="select-images", cache_policy=NO_CACHE)
def select_images(config_file: str, manifest: str) -> list[str]:
    """Images to prepull: the manifest's, or none when ``images.prepull`` is off (e.g. local sandbox) or when
    training and eval both run their sandboxes on a user's Ray cluster (the one prepull decision, `gp train`'s too:
    :func:`graph_planner.integrations.ray_cluster.prepull_here`)."""
    from graph_planner.integrations.ray_cluster import prepull_here

    config = load_resolved(config_file)
    return read_manifest(manifest) if prepull_here(config, ["train", "eval"]) else []


@task(name="prepull-image", cache_policy=NO_CACHE, retries=IO_RETRIES, retry_delay_seconds=IO_RETRY_DELAYS,
      retry_jitter_factor=IO_RETRY_JITTER, retry_condition_fn=transient_only)
def prepull_image(image: str, config_file: str) -> str:
    """Make ``image`` present (per-pull retries from ``images.prepull_*``); raise with the registry's reason."""
    from graph_planner.sandbox.prepull import prepull_images

    settings = load_resolved(config_file).images
    report = prepull_images([image], max_workers=1, retries=settings.prepull_retries, delay=settings.prepull_delay,
                            timeout=settings.prepull_timeout)
    result = report.results[0]
    if result.status == "failed":
        raise RuntimeError(f"prepull {image} failed after {result.attempts} attempt(s): {result.reason}")
    get_run_logger().info("%s: %s in %.1fs", image, result.status, result.seconds)
    return image
