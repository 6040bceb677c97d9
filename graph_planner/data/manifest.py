"""Docker image manifests: plain text, one unique image per line, consumed by prepull and preflight. This module
holds the one manifest reader (:func:`read_manifest`); prepull, `gp images prepull` and the Prefect flow use it.

``docker_images.txt`` lists images to pull; ``docker_images_<split>.txt`` the same per split; custom tasks with a
``build`` spec are built locally, never pulled, so their images go to ``docker_images_build.txt`` instead.
Resolution order (the seeds' helpers): explicit manifest > ``<dataset dir>/docker_images.txt`` > collect from the
dataset's JSONL files and write it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from graph_planner.data.io import NON_SPLIT_FILES, atomic_write_text, read_task_records
from graph_planner.data.record import TaskRecord

log = logging.getLogger(__name__)

MANIFEST_NAME = "docker_images.txt"
BUILD_MANIFEST_NAME = "docker_images_build.txt"


#: A Docker image reference as written in a manifest ([host[:port]/]path[:tag][@digest]): one token, no spaces.
_IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]*")


class ManifestError(ValueError):
    """A manifest could not be found, built or read, or holds something that is not an image name; the message
    names the file (and the line or item)."""


def collect_images(records: Iterable[TaskRecord]) -> list[str]:
    """Unique images to pull, in first-seen order (no None, no build-only images)."""
    return _unique(r.image for r in records if r.image and r.build is None)


def collect_build_images(records: Iterable[TaskRecord]) -> list[str]:
    """Images built from a task's build spec (never pulled)."""
    return _unique(r.image for r in records if r.image and r.build is not None)


def read_manifest(path: str | Path) -> list[str]:
    """Image names from a manifest: one per line (blank lines and ``#`` comments, whole-line or trailing, ignored)
    or a JSON list of names; duplicates dropped, order kept. ManifestError naming the file and line / item for a
    file that cannot be read or an entry that is not one image name."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ManifestError(f"cannot read image manifest {path}: {reason} (write one with `gp data manifest`)") \
            from None
    if text.lstrip().startswith("["):
        return _unique(_json_names(path, text))
    names = []
    for number, line in enumerate(text.splitlines(), start=1):
        name = line.split("#", 1)[0].strip()
        if name and not _IMAGE_REF.fullmatch(name):
            raise ManifestError(f"{path}:{number}: {name!r} is not an image name (one image per line, "
                                "e.g. swebench/sweb.eval.x86_64.django_1776_django-11099:latest)")
        if name:
            names.append(name)
    return _unique(names)


def _json_names(path: Path, text: str) -> list[str]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not a JSON list of image names ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(items, list):
        raise ManifestError(f"{path}: a JSON manifest must be a list of image names")
    for index, item in enumerate(items):
        if not isinstance(item, str) or not _IMAGE_REF.fullmatch(item.strip()):
            raise ManifestError(f"{path}: item {index}: {item!r} is not an image name (a string)")
    return [item.strip() for item in items]


def write_image_list(path: str | Path, images: Sequence[str]) -> Path:
    return atomic_write_text(path, "".join(f"{image}\n" for image in images))


def write_manifest(directory: str | Path, records_by_split: Mapping[str, Sequence[TaskRecord]]) -> Path:
    """Write ``docker_images.txt`` (+ per split, + build-only) into ``directory``; returns the main manifest."""
    directory = Path(directory)
    by_split = {split: collect_images(records) for split, records in records_by_split.items()}
    build = collect_build_images(r for records in records_by_split.values() for r in records)
    return _write_lists(directory, by_split, build)


def merge_manifests(directory: str | Path, source_dirs: Sequence[Path]) -> Path:
    """A combined manifest in ``directory`` from the manifests already written in ``source_dirs``."""
    by_split: dict[str, list[str]] = {}
    build: list[str] = []
    for source_dir in source_dirs:
        for split_file in sorted(source_dir.glob("docker_images_*.txt")):
            split = split_file.stem.removeprefix("docker_images_")
            if split_file.name == BUILD_MANIFEST_NAME:
                build = _unique([*build, *read_manifest(split_file)])
            else:
                by_split[split] = _unique([*by_split.get(split, []), *read_manifest(split_file)])
    return _write_lists(Path(directory), dict(sorted(by_split.items())), build)


def resolve_manifest(explicit: str | Path | None, dataset_dir: str | Path) -> Path:
    """explicit > ``<dataset dir>/docker_images.txt`` > collect from the dataset and write it there.

    ``dataset_dir`` may also be one of its JSONL files (its directory is used).
    """
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ManifestError(f"docker manifest not found: {path} (fix images.manifest / --docker-manifest)")
        return path
    directory = Path(dataset_dir)
    if directory.is_file():
        directory = directory.parent
    existing = directory / MANIFEST_NAME
    if existing.is_file():
        return existing
    records_by_split = _records_by_split(directory)
    if not records_by_split:
        raise ManifestError(
            f"no {MANIFEST_NAME} in {directory} and no TaskRecord JSONL to collect images from "
            f"(run `gp data prepare` or pass --docker-manifest)"
        )
    log.info("collecting images from %s into %s", directory, existing)
    return write_manifest(directory, records_by_split)


def _records_by_split(directory: Path) -> dict[str, list[TaskRecord]]:
    """Records per split from ``<dir>/*.jsonl``, or from the source dirs one level down (a prepare output)."""
    if not directory.is_dir():
        return {}
    files = _split_files(directory)
    if not files:
        files = [f for sub in sorted(p for p in directory.iterdir() if p.is_dir()) for f in _split_files(sub)]
    out: dict[str, list[TaskRecord]] = {}
    for file in files:
        out.setdefault(file.stem, []).extend(read_task_records(file))
    return out


def _split_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.jsonl") if p.name not in NON_SPLIT_FILES)


def _write_lists(directory: Path, by_split: Mapping[str, Sequence[str]], build: Sequence[str]) -> Path:
    for split, images in by_split.items():
        write_image_list(directory / f"docker_images_{split}.txt", images)
    build_path = directory / BUILD_MANIFEST_NAME
    if build:
        write_image_list(build_path, build)
    else:
        build_path.unlink(missing_ok=True)
    return write_image_list(directory / MANIFEST_NAME, _unique(i for images in by_split.values() for i in images))


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
