"""Synthesised tasks kept with the project (``datasets/sample/synth/``): validating every candidate bug of the three
bundled repositories takes minutes on 2 cores, so ``gp data synth`` ran once and its JSONL is committed; the task
repositories (git objects: not committable inside this repository) are rebuilt from the bundled source trees.

A task repository's commits are deterministic (taskrepo.py: root commits, fixed identity and date), so replaying
each record's gold patch in reverse on the clean tree gives back the very commit the record names as its
``base_commit``; any difference (a source tree edited since) is refused, naming the task. ``manifest.json`` holds
what the set was made from (seed, per-target count, task cap, a fingerprint of each source tree): the ``synth``
data source uses the set only when the run asks for exactly that, and synthesises afresh otherwise.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from graph_planner.data.io import read_task_records, write_json
from graph_planner.data.record import TaskRecord
from graph_planner.data.sources.base import RejectedRow
from graph_planner.synth.split import split_by_location
from graph_planner.synth.taskrepo import TaskRepo, copy_tree, synth_image
from graph_planner.synth.validate import SynthInputError

BUNDLED_DIR = Path(__file__).resolve().parents[2] / "datasets" / "sample" / "synth"
MANIFEST = "manifest.json"
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class BundleKey:
    """What a synthesised set depends on: the options that choose candidates and the source trees' contents."""

    seed: int
    per_target: int
    max_tasks: int | None
    sources: tuple[tuple[str, str], ...]  # (repository name, tree fingerprint), sorted


def tree_fingerprint(repo: Path) -> str:
    """sha256 over the files synthesis copies from ``repo`` (tracked files of a git checkout, else the tree
    without caches), by path and content."""
    digest = hashlib.sha256()
    with tempfile.TemporaryDirectory(prefix="gp-synth-fp-") as tmp:
        copy = Path(tmp) / "tree"
        copy_tree(repo, copy)
        for path in sorted(p for p in copy.rglob("*") if p.is_file() or p.is_symlink()):
            digest.update(path.relative_to(copy).as_posix().encode() + b"\0")
            digest.update((str(path.readlink()) if path.is_symlink() else "").encode() + b"\0")
            digest.update(b"" if path.is_symlink() else path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


def bundle_key(repos: list[str | Path], seed: int, per_target: int, max_tasks: int | None) -> BundleKey:
    sources = tuple(sorted((Path(r).resolve().name, tree_fingerprint(Path(r).resolve())) for r in repos))
    return BundleKey(seed, per_target, max_tasks, sources)


def write_manifest(bundle: Path, key: BundleKey, command: str) -> None:
    write_json(bundle / MANIFEST, {"seed": key.seed, "per_target": key.per_target, "max_tasks": key.max_tasks,
                                   "sources": dict(key.sources), "made_with": command})


def read_key(bundle: Path) -> BundleKey | None:
    path = bundle / MANIFEST
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return BundleKey(int(data["seed"]), int(data["per_target"]), data.get("max_tasks"),
                     tuple(sorted(data["sources"].items())))


def matches(bundle: Path, key: BundleKey) -> bool:
    return read_key(bundle) == key


def _mutated_file(repo: Path, record: TaskRecord) -> tuple[str, bytes]:
    """(path, buggy bytes) of the one file a synthesised task changes: its gold patch applied in reverse."""
    path = str((record.metadata.get("synth") or {}).get("path") or "")
    if not path or not (repo / path).is_file():
        raise SynthInputError(f"{record.task_id}: metadata.synth.path {path!r} is not a file of {repo.name}")
    clean = (repo / path).read_bytes()
    done = subprocess.run(["git", "apply", "-R", "--whitespace=nowarn", "-"], cwd=repo, capture_output=True,
                          input=record.gold_patch.encode(), check=False)
    if done.returncode != 0:
        raise SynthInputError(f"{record.task_id}: its gold patch does not reverse onto {repo.name} "
                              f"({done.stderr.decode(errors='replace').strip()}): the source tree changed")
    mutated = (repo / path).read_bytes()
    (repo / path).write_bytes(clean)
    return path, mutated


def materialise(bundle: Path, sources: dict[str, Path], staging: Path) -> list[TaskRecord]:
    """The bundle's records (every split) with their task repositories rebuilt under ``staging/<name>`` from
    ``sources[name]``; each rebuilt commit is checked against the record's ``base_commit``."""
    records = [r for split in SPLITS if (bundle / f"{split}.jsonl").is_file()
               for r in read_task_records(bundle / f"{split}.jsonl")]
    repos: dict[str, TaskRepo] = {}
    out = []
    for record in records:
        if record.repo not in sources:
            raise SynthInputError(f"{record.task_id}: no source tree for repository {record.repo!r}")
        repo = repos.get(record.repo)
        if repo is None:
            repo = repos[record.repo] = TaskRepo(sources[record.repo], staging / record.repo)
        path, mutated = _mutated_file(repo.path, record)
        commit = repo.add_task(path, mutated, record.task_id, f"synth {record.task_id}")
        if commit != record.base_commit:
            raise SynthInputError(f"{record.task_id}: rebuilt as commit {commit}, but base_commit is "
                                  f"{record.base_commit}: the source tree of {record.repo} is not the one the "
                                  f"bundle was made from ({bundle / MANIFEST})")
        out.append(record.model_copy(update={"repo_path": str(repo.path)}))
    for repo in repos.values():
        repo.finish()
    images = {name: synth_image(name, (r.base_commit for r in out if r.repo == name)) for name in repos}
    return [r.model_copy(update={"image": images[r.repo]}) for r in out]


def load_bundle(bundle: Path, sources: dict[str, Path], staging: Path, seed: int, val_frac: float,
                test_frac: float, max_steps: int) -> tuple[list[TaskRecord], list[RejectedRow]]:
    """Materialised records split by location with these fractions (the split is a pure function of the
    locations, so re-splitting gives what synthesising with them would have), and the rejected rows."""
    records = materialise(bundle, sources, staging)
    splits = split_by_location((r.metadata["location"] for r in records), seed, val_frac, test_frac)
    records = [r.model_copy(update={"split": splits[r.metadata["location"]], "max_steps": max_steps})
               for r in records]
    rejected: list[RejectedRow] = []
    path = bundle / "rejected.jsonl"
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rejected.append(RejectedRow(**{k: row[k] for k in RejectedRow.__dataclass_fields__ if k in row}))
    return records, rejected
