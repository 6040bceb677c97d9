"""Weights & Biases tracker: online or offline (``logging.wandb.offline``), run files inside the run directory.

The API key comes from W&B's own ``WANDB_API_KEY`` (or its netrc login) or ``logging.wandb.api_key``; it is handed
to wandb only through its settings and only for online runs, never written to the run config.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graph_planner.config.schema import WandbConfig

log = logging.getLogger(__name__)

#: wandb.init arguments this tracker owns; tracker_kwargs may not override them.
_OWNED = {"config", "dir", "mode"}


class WandbTracker:
    """A `Tracker` over one wandb run; ``watch(model)`` is honoured when ``logging.wandb.watch.enabled``."""

    def __init__(
        self,
        cfg: WandbConfig,
        run_dir: str | Path,
        config_dict: Mapping[str, Any],
        default_name: str | None = None,
        **init_kwargs: Any,
    ) -> None:
        try:
            import wandb
        except ImportError as exc:  # wandb is in the `train` extra
            raise RuntimeError("tracker 'wandb' needs the wandb package: pip install 'graph-planner[train]'") from exc
        clash = _OWNED.intersection(init_kwargs)
        if clash:
            raise TypeError(
                f"{sorted(clash)} are set from the run config (logging.wandb.offline, the run dir, the resolved "
                "config); remove them from logging.tracker_kwargs.wandb"
            )
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        settings = dict(init_kwargs.pop("settings", None) or {})
        if not cfg.offline and cfg.api_key is not None:
            settings["api_key"] = cfg.api_key.get_secret_value()
        init_kwargs.setdefault("project", cfg.project)
        init_kwargs.setdefault("entity", cfg.entity)
        init_kwargs.setdefault("name", cfg.run_name or default_name)
        try:
            self.run = wandb.init(
                mode="offline" if cfg.offline else "online",
                dir=str(self.run_dir),
                config=dict(config_dict),
                settings=wandb.Settings(**settings),
                **init_kwargs,
            )
        except Exception as exc:
            hint = "" if cfg.offline else (
                " For online runs set WANDB_API_KEY (or logging.wandb.api_key), or pass --wandb-offline to write "
                "a local run and `wandb sync` it later."
            )
            raise RuntimeError(f"wandb.init failed (project {cfg.project!r}, dir {self.run_dir}): {exc}.{hint}") from exc
        self._finished = False
        self.run_file = Path(self.run.settings.sync_file)
        log.info("W&B run %s (%s) in %s", self.run.id, "offline" if cfg.offline else "online", self.run.dir)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def log_config(self, config: Mapping[str, Any]) -> None:
        self.run.config.update(dict(config), allow_val_change=True)

    def watch(self, model: Any) -> None:
        """``wandb.watch`` on a local torch model with the configured ``log`` / ``log_freq``; no-op when off."""
        watch = self.cfg.watch
        if not watch.enabled:
            return
        self.run.watch(model, log=watch.log, log_freq=watch.log_freq)

    def finish(self, flush_timeout_s: float = 30.0) -> None:
        """End the run; offline, also wait until the run file is complete so it can be synced or copied."""
        if self._finished:
            return
        self._finished = True
        self.run.finish()
        if self.cfg.offline:
            from graph_planner.telemetry.wandb_offline import wait_for_complete_run

            if not wait_for_complete_run(self.run_file, timeout_s=flush_timeout_s):
                log.warning("W&B run file %s not complete after %.0fs; `wandb sync` may miss its tail",
                            self.run_file, flush_timeout_s)
