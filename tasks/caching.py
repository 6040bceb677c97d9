"""Cache policy pieces for Prefect tasks: keys follow the *content* of what a step reads, not path strings.

* :class:`InputFileContents` — the bytes of every existing file/dir named by a task input, so a changed dataset
  re-runs its step while an unchanged one is served from the persisted result, even across processes.
* :class:`ConfigKeys` — only the run-config values a step reads (and the files they name), so changing
  ``training.lr`` re-runs training and evaluation but not data preparation.
* :class:`LibrarySource` — the source of the ``graph_planner`` modules a task wraps (TASK_SOURCE only sees the
  thin wrapper), so fixing a bug in the library invalidates results it produced.
* :class:`ExistingOutputs` — a cached path result is reused only while the paths still exist (a cache hit that
  points at a deleted ``runs/`` dir would otherwise hand the next step nothing).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from prefect.cache_policies import INPUTS, TASK_SOURCE, CachePolicy
from prefect.context import TaskRunContext

from graph_planner.config.cache_keys import stage_keys
from graph_planner.config.schema import Stage

log = logging.getLogger(__name__)

_SKIP_DIRS = {".git", "__pycache__", ".pytest_cache"}


def hash_path(path: Path, digest: hashlib._Hash, ignore_dirs: frozenset[str] = frozenset()) -> None:
    """Feed a file, or every file under a directory (sorted, with relative names), into ``digest``."""
    if path.is_file():
        digest.update(path.name.encode())
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return
    skip = _SKIP_DIRS | ignore_dirs
    for child in sorted(path.rglob("*")):
        if child.is_file() and not skip.intersection(child.relative_to(path).parts):
            digest.update(str(child.relative_to(path)).encode())
            with child.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)


def _paths_in(value: Any) -> list[Path]:
    if isinstance(value, (str, Path)):
        text = str(value)
        if text and len(text) < 4096 and "\n" not in text:
            path = Path(text)
            try:
                if path.exists():
                    return [path]
            except OSError:
                return []
        return []
    if isinstance(value, (list, tuple)):
        return [p for item in value for p in _paths_in(item)]
    if isinstance(value, dict):
        return [p for item in value.values() for p in _paths_in(item)]
    return []


@dataclass(kw_only=True)
class InputFileContents(CachePolicy):
    """Key on the bytes of every existing file or directory named by a task input.

    ``exclude`` names inputs that are outputs (an output dir exists only after the first run, so hashing it
    would change the key on the second run); ``ignore_dirs`` names sub-dirs that later steps write inside an
    input dir (e.g. ``registry`` inside the prepared data dir).
    """

    exclude: tuple[str, ...] = ()
    ignore_dirs: tuple[str, ...] = ()

    def compute_key(self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any],
                    **kwargs: Any) -> str | None:
        digest = hashlib.sha256()
        for name in sorted(inputs):
            if name in self.exclude:
                continue
            for path in _paths_in(inputs[name]):
                digest.update(name.encode())
                hash_path(path, digest, frozenset(self.ignore_dirs))
        return digest.hexdigest()


def config_value(tree: dict[str, Any], dotted: str) -> Any:
    """The value at ``a.b.c`` in a nested mapping, or None when any part is missing."""
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


@dataclass(kw_only=True)
class ConfigKeys(CachePolicy):
    """Key on the values at ``keys`` of the run-config YAML passed as input ``input_name`` (minus the sub-keys in
    ``exclude``, which the step does not read), and on the bytes of the local files or dirs named at ``files``
    (hub names and missing paths count by their text only)."""

    keys: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    input_name: str = "config_file"

    @classmethod
    def for_stage(cls, stage: Stage) -> ConfigKeys:
        """The keys and files the config declares for ``stage`` (graph_planner.config.cache_keys): the one way
        tasks key on config values, so no step keeps its own list."""
        declared = stage_keys(stage)
        return cls(keys=declared.keys, files=declared.files)

    def compute_key(self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any],
                    **kwargs: Any) -> str | None:
        config_file = Path(str(inputs[self.input_name]))
        tree = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
        for dotted in self.exclude:
            parent, _, leaf = dotted.rpartition(".")
            node = config_value(tree, parent) if parent else tree
            if isinstance(node, dict):
                node.pop(leaf, None)
        digest = hashlib.sha256()
        for dotted in self.keys:
            value = config_value(tree, dotted)
            digest.update(f"{dotted}={json.dumps(value, sort_keys=True, default=str)}\n".encode())
        for dotted in self.files:
            for path in _paths_in(config_value(tree, dotted)):
                digest.update(dotted.encode())
                hash_path(path, digest)
        return digest.hexdigest()


@dataclass(kw_only=True)
class LibrarySource(CachePolicy):
    """Key on the source files of the named modules or packages (e.g. ``graph_planner.data``)."""

    modules: tuple[str, ...] = ()

    def compute_key(self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any],
                    **kwargs: Any) -> str | None:
        digest = hashlib.sha256()
        for name in self.modules:
            spec = importlib.util.find_spec(name)
            if spec is None or spec.origin is None:
                raise ValueError(f"cache policy: module {name!r} not found")
            origin = Path(spec.origin)
            root = origin.parent if origin.name == "__init__.py" else origin
            files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
            for file in files:
                digest.update(str(file.relative_to(root.parent)).encode())
                digest.update(file.read_bytes())
        return digest.hexdigest()


def _result_paths(result: Any) -> list[str]:
    if isinstance(result, (str, Path)):
        return [str(result)]
    if isinstance(result, (list, tuple)):
        return [p for item in result for p in _result_paths(item)]
    if isinstance(result, dict):
        return [p for item in result.values() for p in _result_paths(item)]
    return []


@dataclass(kw_only=True)
class ExistingOutputs(CachePolicy):
    """Wrap a policy for tasks that return paths: a cached result whose paths are gone is not reused.

    The task then runs again and its result is stored under the next *generation* of the same key
    (``<key>-g1``, ``-g2`` ...), so later runs find the fresh record by the same deterministic walk. Use it as the
    outermost policy (``ExistingOutputs(A + B)``): adding it to another policy would hide the final key.
    """

    policy: CachePolicy = field(default_factory=lambda: INPUTS + TASK_SOURCE)
    max_generations: int = 64

    def compute_key(self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any],
                    **kwargs: Any) -> str | None:
        key = self.policy.compute_key(task_ctx=task_ctx, inputs=inputs, flow_parameters=flow_parameters, **kwargs)
        if key is None:
            return None
        store = task_ctx.result_store
        for generation in range(self.max_generations):
            candidate = key if generation == 0 else f"{key}-g{generation}"
            if not store.exists(candidate):
                return candidate
            try:
                result = store.read(candidate).result
            except Exception as exc:  # noqa: BLE001 - an unreadable record is a miss, not a failed task
                log.warning("cached result %s unreadable (%s): running the step again", candidate, exc)
                continue
            missing = [p for p in _result_paths(result) if not Path(p).exists()]
            if not missing:
                return candidate
            log.warning("cached result %s points at missing %s: running the step again", candidate, missing[:3])
        return f"{key}-g{self.max_generations}"


#: The project's cache policy for deterministic steps whose inputs are all files (or plain values).
CONTENT_CACHE = INPUTS + TASK_SOURCE + InputFileContents()


def step_cache(stage: Stage, modules: tuple[str, ...], contents: CachePolicy | None = None,
               inputs: bool = True) -> CachePolicy:
    """The cache policy of a step that returns paths, one recipe for every task module: its inputs but the
    config file (``inputs``), its wrapper's source, the library ``modules`` it runs, the config keys declared
    for ``stage``, and the bytes of what it reads (``contents``); reused only while its outputs exist."""
    policy: CachePolicy = ((INPUTS - "config_file") + TASK_SOURCE) if inputs else TASK_SOURCE
    policy = policy + LibrarySource(modules=modules) + ConfigKeys.for_stage(stage)
    return ExistingOutputs(policy=policy + contents if contents is not None else policy)
