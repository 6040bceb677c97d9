"""Load a dataset split with HF ``datasets``: from the hub by name, or from a local file / saved dataset dir.

Local paths are how this project runs offline (no hub at run time): a parquet/json/jsonl file, a dir saved
with ``save_to_disk``, or a dir laid out like a hub repo (``<split>.jsonl``, ``data/<split>-*.parquet``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datasets

#: File suffix -> `datasets` packaged builder.
BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}
_SAVED_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


class DataSourceError(RuntimeError):
    """A dataset could not be loaded; the message names it and says what to do."""


def hf_token(configured: str | None = None) -> str | None:
    """The token to use: the configured one (config.data.hf_token / --hf-token), else ``HF_TOKEN``."""
    return configured or os.environ.get("HF_TOKEN") or None


def is_local(name_or_path: str) -> bool:
    """A path that exists, or one that is clearly meant as a path (so a typo is not sent to the hub)."""
    path = Path(name_or_path)
    return path.exists() or name_or_path.startswith((".", "/", "~")) or path.suffix in BUILDERS


def load_rows(
    name_or_path: str,
    split: str,
    token: str | None = None,
    limit: int | None = None,
    cache_dir: str | None = None,
) -> datasets.Dataset:
    """One split as a (memory-mapped) ``datasets.Dataset``, cut to its first ``limit`` rows."""
    import datasets

    if is_local(name_or_path):
        dataset = _load_local(Path(name_or_path).expanduser(), split, cache_dir)
    else:
        dataset = _load_hub(name_or_path, split, token, cache_dir)
    if limit is not None and limit < len(dataset):
        dataset = dataset.select(range(limit))
    assert isinstance(dataset, datasets.Dataset)
    return dataset


def iter_rows(dataset: datasets.Dataset, batch_size: int = 256) -> Iterator[dict]:
    """Rows as plain dicts; batched reads are several times faster than ``for row in dataset``."""
    for batch in dataset.iter(batch_size=batch_size):
        columns = list(batch)
        for values in zip(*(batch[c] for c in columns)):
            yield dict(zip(columns, values))


def _load_hub(name: str, split: str, token: str | None, cache_dir: str | None) -> datasets.Dataset:
    import datasets

    try:
        return datasets.load_dataset(name, split=split, token=token, cache_dir=cache_dir)
    except Exception as exc:  # the hub raises many types (ConnectionError, DatasetNotFoundError, ValueError...)
        offline = " (HF_HUB_OFFLINE is set)" if os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0") else ""
        raise DataSourceError(
            f"could not load dataset {name!r} split {split!r} from the Hugging Face hub{offline}: "
            f"{type(exc).__name__}: {exc}. Pass a local path instead (a parquet/json/jsonl file, or a dir "
            f"saved with save_to_disk), or check the name, split and HF_TOKEN / --hf-token."
        ) from exc


def _load_local(path: Path, split: str, cache_dir: str | None) -> datasets.Dataset:
    if not path.exists():
        raise DataSourceError(f"dataset path not found: {path}")
    if path.is_file():
        return _load_files(path, [path], cache_dir)
    if any((path / marker).is_file() for marker in _SAVED_MARKERS):
        return _load_saved(path, split)
    return _load_dir(path, split, cache_dir)


def _load_dir(path: Path, split: str, cache_dir: str | None) -> datasets.Dataset:
    """A dir laid out like a hub repo: its dataset card (README.md) fixes the features and split files, else the
    standard names apply (``<split>.jsonl``, ``data/<split>-*.parquet``, ``<split>/*``)."""
    import datasets

    try:
        return datasets.load_dataset(str(path), split=split, cache_dir=cache_dir)
    except Exception as exc:
        present = sorted(p.name for p in path.iterdir())[:20]
        raise DataSourceError(
            f"{path}: could not load split {split!r} as a dataset dir ({type(exc).__name__}: {exc}); expected "
            f"{split}.parquet/.jsonl/.json, data/{split}-*.parquet or a save_to_disk dir; found {present}"
        ) from exc


def _load_files(origin: Path, files: list[Path], cache_dir: str | None) -> datasets.Dataset:
    import datasets

    suffixes = {f.suffix for f in files}
    if len(suffixes) != 1 or next(iter(suffixes)) not in BUILDERS:
        raise DataSourceError(
            f"{origin}: unsupported data file type {sorted(suffixes)}; use .parquet, .jsonl or .json"
        )
    builder = BUILDERS[files[0].suffix]
    import tempfile

    from graph_planner.data.sources.screen import screen_jsonl

    with tempfile.TemporaryDirectory(prefix="gp-screen-") as work:
        if builder == "json" and files[0].suffix == ".jsonl":
            # bad rows become named rejections instead of failing the whole file (data/sources/screen.py)
            files = [screen_jsonl(f, Path(work) / str(i))[0] for i, f in enumerate(files)]
        try:
            return datasets.load_dataset(
                builder, data_files=[str(f) for f in files], split="train", cache_dir=cache_dir
            )
        except Exception as exc:
            raise DataSourceError(f"{origin}: could not read {builder} data: {type(exc).__name__}: {exc}") from exc


def _load_saved(path: Path, split: str) -> datasets.Dataset:
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:
        raise DataSourceError(f"{path}: not a readable save_to_disk dataset: {type(exc).__name__}: {exc}") from exc
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise DataSourceError(f"{path}: saved dataset has no split {split!r} (splits: {sorted(loaded)})")
        return loaded[split]
    return loaded
