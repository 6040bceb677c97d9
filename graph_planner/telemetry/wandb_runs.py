"""Where a run's W&B runs are: every W&B run of a run directory (its training, each of its evals) writes under
``<run dir>/wandb/`` and is listed in ``<run dir>/wandb/runs.jsonl``, so a report can name all of them: the URL of
an online run, the directory ``wandb sync`` takes for an offline one (the ``offline-run-*`` dir, not its
``files/``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

WANDB_SUBDIR = "wandb"
INDEX = "runs.jsonl"


@dataclass(frozen=True)
class WandbRunRecord:
    job_type: str
    name: str
    run_id: str
    offline: bool
    url: str | None  # online runs
    sync_dir: str  # the run's own dir (offline-run-* / run-*): what `wandb sync` takes

    def where(self) -> str:
        """One markdown fragment: the link online, the sync command offline."""
        return self.url if self.url and not self.offline else f"`wandb sync {self.sync_dir}`"


def wandb_root(run_dir: str | Path) -> Path:
    return Path(run_dir) / WANDB_SUBDIR


def record_run(run_dir: str | Path, record: WandbRunRecord) -> None:
    """Append ``record`` to the run dir's index (one line per W&B run, in start order)."""
    root = wandb_root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    with (root / INDEX).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(asdict(record)) + "\n")


def wandb_runs(*run_dirs: str | Path) -> list[WandbRunRecord]:
    """The W&B runs recorded in these run dirs, in order, each once (a dir given twice is read once)."""
    out: list[WandbRunRecord] = []
    seen: set[str] = set()
    for run_dir in dict.fromkeys(Path(d).resolve() for d in run_dirs):
        index = wandb_root(run_dir) / INDEX
        if not index.is_file():
            continue
        for line in index.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = WandbRunRecord(**json.loads(line))
                if record.run_id not in seen:
                    seen.add(record.run_id)
                    out.append(record)
    return out


def report_lines(records: list[WandbRunRecord]) -> list[str]:
    """Report list items naming every W&B run: ``- W&B train run: <url>`` / ``- W&B eval run (offline): `wandb
    sync <dir>```."""
    return [f"- W&B {r.job_type} run{' (offline)' if r.offline else ''} {r.name}: {r.where()}" for r in records]
