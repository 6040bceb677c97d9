"""Every path a run reads or writes, derived in one place from the run config.

A run directory is ``<logging.output_dir>/<run_name>`` (the loader records it as ``resolved_run_dir``); prepared
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
        return self.run_dir / "training_curves.png"

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
    return RunPaths(run_dir=Path(config.logging.output_dir) / config.run_name, data_dir=Path(config.data.output_dir),
                    dataset_name=config.data.dataset_name, cache_dir=Path(config.paths.cache_dir))
