"""Every path a run reads or writes, derived in one place from the run config.

A run directory is ``<logging.output_dir>/<run_name>`` for a named run and ``<logging.output_dir>/<name>-<UTC stamp>``
for an unnamed one (:mod:`graph_planner.config.run_dirs`; the loader records it as ``resolved_run_dir``); prepared
data lives under ``data.output_dir`` and its verl parquet under ``<data.output_dir>/registry/<dataset_name>/``.
Code that needs one of these asks :func:`run_paths` instead of joining the parts itself, so moving a directory is
a one-line change here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph_planner.config.schema import RunConfig

RESOLVED_CONFIG = "resolved_config.yaml"
REGISTRY = "registry"
CHECKPOINTS = "checkpoints"
TRAINING_CURVES = "training_curves.png"
#: ``<output_dir>/<name>-latest`` names the newest unnamed run of a config.
LATEST = "latest"


def parquet_path(registry: str | Path, dataset_name: str, split: str) -> Path:
    """The one layout of registered verl parquet: ``<registry>/<dataset_name>/<split>.parquet`` (the registry
    writes it, training reads it)."""
    return Path(registry) / dataset_name / f"{split}.parquet"


@dataclass(frozen=True)
class RunPaths:
    """The run's directories and files (nothing is created here)."""

    run_dir: Path
    data_dir: Path
    dataset_name: str
    cache_dir: Path

    @property
    def resolved_config(self) -> Path:
        """The merged config the run was started with (reloads to the same run)."""
        return self.run_dir / RESOLVED_CONFIG

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / CHECKPOINTS

    @property
    def evals(self) -> Path:
        """Cached Prefect eval runs: ``evals/<cache-key fingerprint>/eval``."""
        return self.run_dir / "evals"

    @property
    def training_curves(self) -> Path:
        return self.run_dir / TRAINING_CURVES

    @property
    def sft(self) -> Path:
        """The trajectory SFT warm start (``sft/model`` = its HF model dir, ``sft/sft.json``)."""
        return self.run_dir / "sft"

    @property
    def learning(self) -> Path:
        """The base / SFT / GRPO before-after comparison (``learning.json``, ``learning.md``)."""
        return self.run_dir / "learning"

    @property
    def report(self) -> Path:
        """The run's report.md (learning table + eval summary) when the pipeline compares stages."""
        return self.run_dir / "report.md"

    @property
    def registry(self) -> Path:
        """Where `gp data register` writes datasets: ``<data.output_dir>/registry``."""
        return self.data_dir / REGISTRY

    def parquet(self, split: str) -> Path:
        """The registered verl parquet of ``split``: ``<registry>/<dataset_name>/<split>.parquet``."""
        return parquet_path(self.registry, self.dataset_name, split)

    @property
    def graphs(self) -> Path:
        """The code-graph cache shared by every episode (``<paths.cache_dir>/graphs``)."""
        return self.cache_dir / "graphs"

    def smoke_logs(self, task_safe_id: str) -> Path:
        """`gp smoke`'s trajectory and test-run JSONL of one task."""
        return self.run_dir / "smoke" / task_safe_id


def run_paths(config: RunConfig) -> RunPaths:
    """The paths of ``config``'s run (relative paths stay relative to the working directory)."""
    return RunPaths(run_dir=current_run_dir(config), data_dir=Path(config.data.output_dir),
                    dataset_name=config.data.dataset_name, cache_dir=Path(config.paths.cache_dir))


def is_named(config: RunConfig) -> bool:
    """Whether the user named the run (then its directory is the name, without a timestamp)."""
    return bool(config.experiment.run_name or config.logging.wandb.run_name)


def named_run_dir(config: RunConfig) -> Path:
    """``<output_dir>/<run_name>``: a named run's directory, and an unnamed config's until a run claims one."""
    return Path(config.logging.output_dir) / config.run_name


def latest_link(config: RunConfig) -> Path:
    """``<output_dir>/<experiment.name>-latest``: the newest unnamed run of the config (a symlink, or a text file
    naming the directory where symlinks are unavailable)."""
    return Path(config.logging.output_dir) / f"{config.experiment.name}-{LATEST}"


def recorded_run_dir(config: RunConfig) -> Path | None:
    """The unnamed run directory recorded in ``resolved_run_dir`` while it still belongs to this config (same
    output_dir and experiment name): a reloaded resolved_config.yaml keeps its run's directory."""
    if is_named(config) or not config.resolved_run_dir:
        return None
    path = Path(config.resolved_run_dir)
    name = config.experiment.name
    if (path.name.startswith(f"{name}-") and path.name != f"{name}-{LATEST}"
            and path.parent.resolve() == Path(config.logging.output_dir).resolve()):
        return path
    return None


def current_run_dir(config: RunConfig) -> Path:
    """The run directory ``config`` names now (nothing is created): named, recorded, else ``<output_dir>/<name>``."""
    return recorded_run_dir(config) or named_run_dir(config)
