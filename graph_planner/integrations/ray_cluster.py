"""Which Ray cluster a run uses, and what follows from it: the one resolution of the address, shared by the verl
training job (:mod:`graph_planner.training.ray.job`) and eval's Ray executor (:mod:`graph_planner.eval.ray_executor`),
and the decisions that depend on where the sandboxes run (the prepull, the model-path checks).

Precedence: an explicit address (a function argument) > ``resources.ray_address`` > Ray's own ``RAY_ADDRESS``
variable > none, which means a private local head the project starts for the run (with its own token).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Literal

from graph_planner.config.schema import ResourcesConfig, RunConfig

log = logging.getLogger(__name__)

#: Ray's own variable naming a running cluster (``ray job submit`` and ``ray.init`` read it too).
RAY_ADDRESS_VAR = "RAY_ADDRESS"


def user_cluster_address(resources: ResourcesConfig, explicit: str | None = None) -> str | None:
    """The user's cluster: ``explicit`` > ``resources.ray_address`` > ``RAY_ADDRESS``; None = a private head."""
    return explicit or resources.ray_address or os.environ.get(RAY_ADDRESS_VAR) or None


def training_cluster(config: RunConfig) -> str | None:
    """The user's cluster a verl training run's sandboxes and model loads happen on; None when they happen on this
    machine (the local backend, or verl on a private head). Paths and images are then the cluster's own."""
    if config.training.backend != "verl":
        return None
    return user_cluster_address(config.resources)


Stage = Literal["train", "eval"]


def stage_cluster(config: RunConfig, stage: Stage) -> str | None:
    """The user's cluster whose nodes run the sandboxes of ``stage`` (training on verl, eval with
    ``eval.executor=ray``); None when they run on this machine (a private head runs here too)."""
    if stage == "train":
        return training_cluster(config)
    return user_cluster_address(config.resources) if config.eval.executor == "ray" else None


def prepull_here(config: RunConfig, stages: Iterable[Stage]) -> bool:
    """The one prepull decision (``images.prepull``, seed 000's --prepull-containers): pull the manifest's images
    on this machine when a stage that follows runs its sandboxes here. When every stage runs them on a user's Ray
    cluster, pulling here would not help: logged, and left to `gp images prepull` on the cluster's nodes."""
    if not config.images.prepull:
        return False
    remote = {stage: stage_cluster(config, stage) for stage in stages}
    if remote and all(remote.values()):
        log.warning("images.prepull: the sandboxes run on the Ray cluster at %s; run `gp images prepull` on its "
                    "nodes (nothing is pulled here)", next(iter(remote.values())))
        return False
    return True
