"""`prepare_datasets`: load every configured source, normalise rows into TaskRecords and write the prepared dirs.

Output (all paths inside are relative, so the dir moves between machines; re-running on unchanged input gives
byte-identical files)::

    <out>/<source>/<split>.jsonl          r2e_gym/{train,val}, swebench/<split>, custom/<split>
    <out>/<source>/instances/<id>.json    one full TaskRecord per task
    <out>/<source>/rejected.jsonl         {source, split, row_index, task_id, reason} per rejected row
    <out>/<source>/docker_images*.txt     manifests (see graph_planner.data.manifest)
    <out>/<source>/repos/<name>/          local repo trees copied from --repos-dir / custom repo_path
    <out>/<source>/summary.json, <out>/summary.json, <out>/docker_images*.txt
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from graph_planner.config.schema import DataConfig
from graph_planner.data.io import (
    NON_SPLIT_FILES,
    atomic_write_bytes,
    task_records_jsonl,
    write_json,
    write_jsonl,
)
from graph_planner.data.manifest import MANIFEST_NAME, collect_images, merge_manifests, write_manifest
from graph_planner.data.record import LOCAL_IMAGE_NAMESPACE, TaskRecord, swebench_image_name
from graph_planner.data.sources import custom, r2e_gym, swebench
from graph_planner.data.sources.base import RejectedRow, RowRejected, repo_short_name
from graph_planner.data.sources.hf_loader import DataSourceError, hf_token, iter_rows, load_rows
from graph_planner.data.sources.screen import REJECTED_KEY

#: progress(stage, rows done, rows total): lets the CLI draw a bar without this module knowing about rich.
ProgressCallback = Callable[[str, int, int], None]
SOURCE_DIRS = ("r2e_gym", "swebench", "custom", "synth", "mined")
#: Sources that live above this layer (graph_planner.synth registers "synth"): name -> builder. A builder gets the
#: data settings and returns None when its settings select nothing, else its records and rejected rows.
SourceBuilder = Callable[[DataConfig, "ProgressCallback | None"], "tuple[list[TaskRecord], list[RejectedRow]] | None"]
SOURCE_BUILDERS: dict[str, SourceBuilder] = {}


def register_source(name: str, builder: SourceBuilder) -> None:
    """Let ``prepare_datasets`` run ``builder`` (idempotent; the importing package calls it at import)."""
    SOURCE_BUILDERS[name] = builder


class PrepareError(ValueError):
    """The data settings cannot work (e.g. nothing selected, val size too large); names the setting to fix."""


class SplitCounts(BaseModel):
    kept: int = 0
    rejected: int = 0
    path: str | None = Field(None, description="The split's JSONL, relative to the output dir.")


class SourceSummary(BaseModel):
    source: str
    dir: str = Field(description="Source dir, relative to the output dir.")
    splits: dict[str, SplitCounts] = Field(default_factory=dict)
    images: int = 0
    repos: list[str] = Field(default_factory=list, description="Repo trees copied under <dir>/repos/.")


class PrepareSummary(BaseModel):
    out_dir: str
    sources: dict[str, SourceSummary] = Field(default_factory=dict)
    manifest: str | None = Field(None, description="Combined docker manifest, relative to the output dir.")

    @property
    def total_kept(self) -> int:
        return sum(c.kept for s in self.sources.values() for c in s.splits.values())

    @property
    def total_rejected(self) -> int:
        return sum(c.rejected for s in self.sources.values() for c in s.splits.values())

    @property
    def nothing_kept(self) -> bool:
        """True when no row survived: the command must fail rather than hand training an empty dataset."""
        return self.total_kept == 0

    def split_path(self, source: str, split: str) -> Path:
        """Absolute path of one prepared split JSONL."""
        rel = self.sources[source].splits[split].path
        if rel is None:
            raise KeyError(f"{source}/{split} has no output file")
        return Path(self.out_dir) / rel


@dataclass
class _SourceResult:
    records: dict[str, list[TaskRecord]] = field(default_factory=dict)
    rejected: list[RejectedRow] = field(default_factory=list)
    seen: dict[str, str] = field(default_factory=dict)  # safe_id -> "split row N" of its first occurrence

    def add(self, record: TaskRecord, row_index: int) -> None:
        first = self.seen.get(record.safe_id)
        if first is not None:
            raise RowRejected(f"task_id: duplicate of {first} (same id or same instance file name)", record.task_id)
        self.seen[record.safe_id] = f"{record.split} row {row_index}"
        self.records.setdefault(record.split, []).append(record)


def prepare_datasets(
    data: DataConfig,
    out_dir: str | Path | None = None,
    progress: ProgressCallback | None = None,
    cache_dir: str | None = None,
) -> PrepareSummary:
    """Run every selected source (R2E-Gym, SWE-bench, custom) and write the prepared layout under ``out_dir``."""
    out = Path(out_dir or data.output_dir)
    if data.skip_r2e and data.skip_swebench and not data.custom_path and not data.synth_repos:
        raise PrepareError("nothing to prepare: skip_r2e and skip_swebench are set and no custom_path or "
                           "synth_repos is given")
    if data.synth_repos and "synth" not in SOURCE_BUILDERS:
        raise PrepareError("data.synth_repos is set but the synth source is not loaded: import graph_planner.synth "
                           "first (the gp command and the Prefect data step do)")
    token = hf_token(data.hf_token.get_secret_value() if data.hf_token else None)
    repos_dir = Path(data.repos_dir).expanduser() if data.repos_dir else None
    summary = PrepareSummary(out_dir=str(out))
    if not data.skip_r2e:
        result = _prepare_r2e(data, token, progress, cache_dir)
        summary.sources["r2e_gym"] = _write_source(out, "r2e_gym", result, repos_dir)
    if not data.skip_swebench:
        result = _prepare_swebench(data, token, progress, cache_dir)
        summary.sources["swebench"] = _write_source(out, "swebench", result, repos_dir)
    if data.custom_path:
        result = _prepare_custom(data, progress)
        summary.sources["custom"] = _write_source(out, "custom", result, repos_dir)
    for name, builder in sorted(SOURCE_BUILDERS.items()):
        built = builder(data, progress)
        if built is not None:
            summary.sources[name] = write_source(out, name, *built)
    present = [out / name for name in SOURCE_DIRS if (out / name / MANIFEST_NAME).is_file()]
    if present:
        summary.manifest = merge_manifests(out, present).relative_to(out).as_posix()
    write_json(out / "summary.json", summary.model_dump(mode="json", exclude={"out_dir"}))  # movable: no abs path
    return summary


def _prepare_r2e(data: DataConfig, token: str | None, progress: ProgressCallback | None,
                 cache_dir: str | None) -> _SourceResult:
    train = load_rows(data.r2e_dataset, data.r2e_split, token, data.r2e_limit, cache_dir)
    parts: list[tuple[str, str, Iterable[tuple[int, dict[str, Any]]], int]] = []
    if data.r2e_val_split:
        val = load_rows(data.r2e_dataset, data.r2e_val_split, token, data.r2e_limit, cache_dir)
        parts.append(("val", data.r2e_val_split, enumerate(iter_rows(val)), len(val)))
        parts.append(("train", data.r2e_split, enumerate(iter_rows(train)), len(train)))
    elif data.r2e_val_size:
        if data.r2e_val_size >= len(train):
            raise PrepareError(
                f"data.r2e_val_size ({data.r2e_val_size}) must be smaller than the R2E rows read "
                f"({len(train)} from {data.r2e_dataset!r} split {data.r2e_split!r}); lower it or raise r2e_limit"
            )
        rows = enumerate(iter_rows(train))
        head = _take(rows, data.r2e_val_size)
        parts.append(("val", data.r2e_split, head, data.r2e_val_size))
        parts.append(("train", data.r2e_split, rows, len(train) - data.r2e_val_size))
    else:
        parts.append(("train", data.r2e_split, enumerate(iter_rows(train)), len(train)))
    result = _SourceResult()
    for split, hf_split, rows_iter, total in parts:
        for index, row in _counting(rows_iter, f"r2e_gym/{split}", total, progress):
            _normalise_into(result, r2e_gym.SOURCE, split, index, r2e_gym.normalize_r2e_row,
                            row, split, data.max_steps, {"hf_split": hf_split, "row_index": index})
    return result


def _prepare_swebench(data: DataConfig, token: str | None, progress: ProgressCallback | None,
                      cache_dir: str | None) -> _SourceResult:
    try:
        dataset = load_rows(data.swebench_dataset, data.swebench_split, token, data.swebench_limit, cache_dir)
    except DataSourceError as exc:
        if data.swebench_split == "test":
            raise
        raise DataSourceError(
            f"{exc}\nSWE-bench Verified publishes one split, 'test' (500 rows); seed 000's default "
            f"--swebench-split validation does not exist there: pass --swebench-split test (our default), or point "
            f"--swebench-dataset at a dataset that has a {data.swebench_split!r} split") from exc
    split = data.swebench_split
    result = _SourceResult()
    rows = _counting(enumerate(iter_rows(dataset)), f"swebench/{split}", len(dataset), progress)
    for index, row in rows:
        _normalise_into(result, swebench.SOURCE, split, index, swebench.normalize_swebench_row,
                        row, split, data.max_steps, {"row_index": index})
    return result


def _prepare_custom(data: DataConfig, progress: ProgressCallback | None) -> _SourceResult:
    assert data.custom_path is not None
    path = Path(data.custom_path).expanduser()
    rows = custom.load_custom_rows(path)
    result = _SourceResult()
    for index, row in _counting(iter(rows), "custom", len(rows), progress):
        split = row.get("split") if isinstance(row, dict) and isinstance(row.get("split"), str) else None
        _normalise_into(result, custom.SOURCE, split or custom.DEFAULT_SPLIT, index, custom.normalize_custom_row,
                        row, path.parent, data.max_steps)
    return result


def _normalise_into(result: _SourceResult, source: str, split: str, index: int,
                    normalise: Callable[..., TaskRecord], *args: Any) -> None:
    """Add the normalised record, or a rejected entry carrying the adapter's column-named reason."""
    row = args[0] if args else None
    if isinstance(row, dict) and REJECTED_KEY in row:
        reason = row.pop(REJECTED_KEY)
        if reason:  # a line the screen refused (not UTF-8, not JSON, a value of another type)
            result.rejected.append(RejectedRow(source, split, index, None, str(reason)))
            return
    try:
        result.add(normalise(*args), index)
    except RowRejected as exc:
        result.rejected.append(RejectedRow(source, split, index, exc.task_id, exc.reason))


# --- writing --------------------------------------------------------------------------------------------------


class _RepoCopies:
    """Local repo trees copied into ``<source dir>/repos/<name>`` (once each); records point there relatively."""

    def __init__(self, source_dir: Path, repos_dir: Path | None) -> None:
        self.source_dir = source_dir
        self.repos_dir = repos_dir
        self.names: dict[Path, str] = {}

    def for_repo(self, repo: str) -> str | None:
        if self.repos_dir is None:
            return None
        candidate = self.repos_dir / repo_short_name(repo)
        return self.for_path(candidate) if candidate.is_dir() else None

    def for_path(self, path: str | Path) -> str:
        path = Path(path).resolve()
        if path not in self.names:
            taken = set(self.names.values())
            name, n = path.name, 2
            while name in taken:
                name, n = f"{path.name}-{n}", n + 1
            self.names[path] = name
        return f"repos/{self.names[path]}"

    def localise(self, record: TaskRecord) -> TaskRecord:
        update: dict[str, Any] = {}
        if record.repo_path is not None:
            update["repo_path"] = self.for_path(record.repo_path)
        else:
            local = self.for_repo(record.repo)
            if local is not None:
                update["repo_path"] = local
        if record.build is not None and Path(record.build.repo).is_absolute():
            update["build"] = record.build.model_copy(update={"repo": self.for_path(record.build.repo)})
        if "repo_path" in update and record.image == swebench_image_name(record.task_id):
            # built here from the local tree by `gp images build`: never under the official image's name
            update["image"] = swebench_image_name(record.task_id, namespace=LOCAL_IMAGE_NAMESPACE)
        return record.model_copy(update=update) if update else record

    def copy_all(self) -> list[str]:
        repos = self.source_dir / "repos"
        wanted = set(self.names.values())
        if repos.is_dir():
            for stale in repos.iterdir():
                if stale.name not in wanted:
                    _remove(stale)
        for src, name in sorted(self.names.items(), key=lambda item: item[1]):
            _replace_dir(repos / name, lambda tmp, s=src: shutil.copytree(
                s, tmp, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")))
        return sorted(wanted)


def _write_source(out: Path, source: str, result: _SourceResult, repos_dir: Path | None) -> SourceSummary:
    source_dir = out / source
    source_dir.mkdir(parents=True, exist_ok=True)
    copies = _RepoCopies(source_dir, repos_dir)
    by_split = {split: [copies.localise(r) for r in records] for split, records in result.records.items()}
    splits = sorted(set(by_split) | {r.split for r in result.rejected})
    by_split = {split: by_split.get(split, []) for split in splits}
    repos = copies.copy_all()
    for split, records in by_split.items():
        atomic_write_bytes(source_dir / f"{split}.jsonl", task_records_jsonl(records))
    _sync_instances(source_dir / "instances", by_split.values())
    write_jsonl(source_dir / "rejected.jsonl", (r.to_dict() for r in result.rejected))
    write_manifest(source_dir, by_split)
    _remove_stale(source_dir, set(splits))
    summary = SourceSummary(
        source=source,
        dir=source,
        images=len(collect_images(r for records in by_split.values() for r in records)),
        repos=repos,
    )
    for split in splits:
        summary.splits[split] = SplitCounts(
            kept=len(by_split[split]),
            rejected=sum(1 for r in result.rejected if r.split == split),
            path=f"{source}/{split}.jsonl",
        )
    write_json(source_dir / "summary.json", summary.model_dump(mode="json"))
    return summary


def write_source(out: str | Path, source: str, records: Iterable[TaskRecord],
                 rejected: Iterable[RejectedRow] = ()) -> SourceSummary:
    """Write one source's prepared dir from ready records (split JSONL, instances/, rejected.jsonl, manifests,
    repos/ copied from each record's absolute ``repo_path``): the layout of every other source."""
    result = _SourceResult(rejected=list(rejected))
    for index, record in enumerate(records):
        result.add(record, index)
    return _write_source(Path(out), source, result, None)


def _sync_instances(directory: Path, groups: Iterable[list[TaskRecord]]) -> None:
    """One ``<safe_id>.json`` per record; unchanged files are left alone, files of dropped tasks removed."""
    directory.mkdir(parents=True, exist_ok=True)
    wanted: set[str] = set()
    for records in groups:
        for record in records:
            path = directory / f"{record.safe_id}.json"
            wanted.add(path.name)
            data = (record.model_dump_json(indent=2) + "\n").encode("utf-8")
            if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
                continue
            atomic_write_bytes(path, data)
    for path in directory.iterdir():
        if path.name not in wanted:
            _remove(path)


def _remove_stale(source_dir: Path, splits: set[str]) -> None:
    """Drop split files of an earlier run that this run no longer produces (e.g. val after val_size=0)."""
    for path in source_dir.glob("*.jsonl"):
        if path.name not in NON_SPLIT_FILES and path.stem not in splits:
            path.unlink()
    for path in source_dir.glob("docker_images_*.txt"):
        split = path.stem.removeprefix("docker_images_")
        if split != "build" and split not in splits:
            path.unlink()


def _replace_dir(target: Path, fill: Callable[[Path], Any]) -> None:
    """Build a dir next to ``target`` and swap it in, so readers never see a half-written tree."""
    tmp = target.with_name(f".{target.name}.tmp")
    old = target.with_name(f".{target.name}.old")
    for leftover in (tmp, old):
        _remove(leftover)
    fill(tmp)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    _remove(old)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _take(rows: Iterator[tuple[int, dict[str, Any]]], n: int) -> list[tuple[int, dict[str, Any]]]:
    return [next(rows) for _ in range(n)]


def _counting(rows: Iterable[Any], stage: str, total: int, progress: ProgressCallback | None,
              every: int = 256) -> Iterator[Any]:
    if progress:
        progress(stage, 0, total)
    for done, item in enumerate(rows, start=1):
        yield item
        if progress and (done % every == 0 or done == total):
            progress(stage, done, total)


def register_prepared(dataset_dir: str | Path, name: str, rllm_layout: bool = False) -> list[Any]:
    """Register every prepared split with kept rows (``summary.json`` of ``prepare_datasets``) as verl parquet
    under ``<dataset_dir>/registry/<name>/<split>.parquet``; returns the ``RegisterResult`` of each split."""
    import json

    from graph_planner.config.paths import REGISTRY
    from graph_planner.data.registry import register_dataset

    summary = PrepareSummary.model_validate(
        {**json.loads((Path(dataset_dir) / "summary.json").read_text(encoding="utf-8")), "out_dir": str(dataset_dir)})
    by_split: dict[str, list[Path]] = {}
    for source in summary.sources.values():
        for split, counts in source.splits.items():
            if counts.kept:
                by_split.setdefault(split, []).append(summary.split_path(source.source, split))
    registry = Path(dataset_dir) / REGISTRY
    return [register_dataset(files, name, registry, split, rllm_layout) for split, files in sorted(by_split.items())]
