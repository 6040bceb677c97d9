"""Weights & Biases tracker: online or offline (``logging.wandb.offline``), run files in ``<run dir>/wandb/`` (an
eval's too, not inside its eval dir), each run listed in ``<run dir>/wandb/runs.jsonl`` (see ``wandb_runs``).

The API key comes from W&B's own ``WANDB_API_KEY`` (or its netrc login) or ``logging.wandb.api_key``; it is handed
to wandb only through its settings and only for online runs, never written to the run config.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
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
        job_type: str | None = None,
        tags: Sequence[str] = (),
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
        # no run metadata: it records the command line (`--set logging.wandb.api_key=...`, `--hf-token ...`) and
        # the host; nor the program's code
        settings.setdefault("x_disable_meta", True)
        settings.setdefault("disable_code", True)
        settings.setdefault("save_code", False)
        if not cfg.offline and cfg.api_key is not None:
            settings["api_key"] = cfg.api_key.get_secret_value()
        init_kwargs.setdefault("project", cfg.project)
        init_kwargs.setdefault("entity", cfg.entity)
        # an explicit name is the user's; a derived one is made unique, so runs of one config stay apart
        init_kwargs.setdefault("name", cfg.run_name or unique_run_name(default_name or "run", job_type))
        init_kwargs.setdefault("group", cfg.group or default_name)
        init_kwargs.setdefault("job_type", job_type)
        init_kwargs.setdefault("tags", list(dict.fromkeys([*tags, *cfg.tags])))
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
        self.sync_dir = Path(self.run.settings.sync_dir).resolve()  # offline-run-*: what `wandb sync` takes
        from graph_planner.telemetry.wandb_runs import WandbRunRecord, record_run

        url = getattr(self.run, "url", None)
        record_run(self.run_dir, WandbRunRecord(
            job_type=job_type or "run", name=self.run.name or self.run.id, run_id=self.run.id, offline=cfg.offline,
            url=None if cfg.offline else url, sync_dir=str(self.sync_dir)))
        log.info("W&B run %s (%s) in %s", self.run.id, "offline" if cfg.offline else "online", self.run.dir)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
        """A `wandb.Table` (e.g. the per-task eval results), browsable and filterable in the W&B UI."""
        import wandb

        data = [[_cell(row.get(column)) for column in columns] for row in rows]
        self.run.log({key: wandb.Table(columns=list(columns), data=data)})

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        """PNG plots as `wandb.Image`s under ``plots/<name>``."""
        import wandb

        present = {name: Path(path) for name, path in images.items() if Path(path).is_file()}
        if present:
            self.run.log({f"plots/{name}": wandb.Image(str(path)) for name, path in present.items()})

    def log_artifact(self, path: str | Path, name: str, kind: str = "model") -> None:
        """Upload a file or directory (a checkpoint) as a versioned W&B artifact."""
        import wandb

        path = Path(path)
        artifact = wandb.Artifact(name=name, type=kind)
        if path.is_dir():
            artifact.add_dir(str(path))
        else:
            artifact.add_file(str(path))
        self.run.log_artifact(artifact)

    def links(self) -> dict[str, str]:
        """Where to look at this run: its URL online, its local run dir offline (the one `wandb sync` takes; the
        run's ``files/`` below it is not a run to wandb)."""
        url = getattr(self.run, "url", None)
        return {"wandb": url} if url and not self.cfg.offline else {"wandb_offline_dir": str(self.sync_dir)}

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


def unique_run_name(base: str, job_type: str | None) -> str:
    """``<run name>-<job type>-<UTC time>``: W&B lists runs by name, and every run of a config had the same one."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return "-".join(part for part in (base, job_type, stamp) if part)


def git_sha(path: str | Path | None = None) -> str | None:
    """Short sha of the checkout the code runs from (None outside a git checkout), for run tags."""
    where = Path(path) if path else Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=where, capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{7,40}", sha) else None


def _cell(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)
