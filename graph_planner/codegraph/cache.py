"""On-disk cache of code graphs keyed by (repo, base commit, builder version), shared by episodes of one task."""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from graph_planner.codegraph.builder import build_graph
from graph_planner.codegraph.graph import CodeGraph
from graph_planner.codegraph.schema import BUILDER_VERSION

log = logging.getLogger(__name__)

FilesLoader = Callable[[], Mapping[str, bytes | str]]


def cache_key(repo: str, commit: str) -> str:
    return hashlib.sha256(f"{repo}\0{commit}\0{BUILDER_VERSION}".encode()).hexdigest()


class GraphCache:
    """`get_or_build` returns a fresh CodeGraph each call (callers update graphs after patches, so a shared
    in-memory object would leak one episode's edits into the next)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def path_for(self, repo: str, commit: str) -> Path:
        return self.root / f"{cache_key(repo, commit)}.json.gz"

    def get(self, repo: str, commit: str) -> CodeGraph | None:
        path = self.path_for(repo, commit)
        if not path.exists():
            return None
        try:
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                return CodeGraph.from_json(json.load(handle))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("code graph cache entry %s for %s@%s is unreadable (%s); rebuilding it", path, repo,
                        commit, exc)
            return None

    def put(self, graph: CodeGraph) -> Path:
        if not graph.commit:
            raise ValueError(f"cannot cache the graph of {graph.repo}: it has no base commit to key it by")
        path = self.path_for(graph.repo, graph.commit)
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as handle:
                handle.write(json.dumps(graph.to_json(), separators=(",", ":")).encode("utf-8"))
            os.replace(tmp, path)  # atomic: concurrent episodes never read a half-written entry
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def get_or_build(self, repo: str, commit: str | None, files_loader: FilesLoader) -> CodeGraph:
        """Cached graph of (repo, commit), else load the files, build and store. Without a commit there is no
        safe key, so the graph is built and not cached."""
        if commit:
            cached = self.get(repo, commit)
            if cached is not None:
                self.hits += 1
                return cached
        self.misses += 1
        graph = build_graph(files_loader(), repo, commit)
        if commit:
            self.put(graph)
        return graph
