"""CodeGraph: the nodes, edges and file texts of one repository at one commit, with lookup indexes.

Edges are grouped by owner (the file whose parse or resolution produced them, or the package structure), so an
incremental update can replace exactly what a changed file contributed. Build logic lives in `builder.py`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from graph_planner.codegraph.parser import Engine, ImportStmt, ParsedModule
from graph_planner.codegraph.schema import BUILDER_VERSION, REPO_ID, Edge, EdgeKind, Node, NodeKind

STRUCTURE_OWNER = "#structure"


class UnknownNodeError(KeyError):
    """A node id that is not in the graph; the message suggests close ids and how to find real ones."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


@dataclass
class SearchIndex:
    """Lower-cased names and qualnames -> node ids (REPO excluded), and the file/package nodes, for `find`."""

    by_name: dict[str, list[str]]
    by_qualname: dict[str, list[str]]
    containers: list[Node]


@dataclass
class UpdateReport:
    """What an incremental update did: parsed files, files whose edges were re-resolved, and why."""

    changed: list[str] = field(default_factory=list)
    reresolved: list[str] = field(default_factory=list)
    structure_changed: bool = False


class CodeGraph:
    """Graph of one repo at one commit. Node ids are stable strings (see `schema.py`)."""

    def __init__(self, repo: str, commit: str | None = None) -> None:
        self.repo = repo
        self.commit = commit
        self.engine: Engine = "auto"  # parser engine, reused when a file is re-parsed
        self.nodes: dict[str, Node] = {}
        self.files: dict[str, str] = {}  # path -> text (Python and text files)
        self.file_nodes: dict[str, list[str]] = {}  # path -> ids of the nodes the file defines (FILE node first)
        self.imports: dict[str, list[ImportStmt]] = {}
        self.class_bases: dict[str, tuple[str, ...]] = {}  # class id -> base names as written
        self.deps: dict[str, frozenset[tuple[str, ...]]] = {}  # path -> dependency keys its resolution consulted
        self.parse_errors: dict[str, str] = {}
        self.symbols: dict[str, dict[str, str]] = {}  # path -> qualname -> node id (earliest definition wins)
        self.package_dirs: set[str] = set()
        self.module_of: dict[str, str] = {}  # python path -> dotted module name
        self.module_alias: dict[str, str] = {}  # python path -> dotted repo path, when different (namespace pkgs)
        self.path_of_module: dict[str, str] = {}
        self._owned: dict[str, list[Edge]] = {}
        self._out: dict[str, dict[Edge, None]] = {}
        self._in: dict[str, dict[Edge, None]] = {}
        self._parsed: dict[str, ParsedModule] = {}  # not serialised: re-parsed from `files` when needed
        self._def_ids: dict[str, list[str]] = {}  # node ids of `_parsed[path].definitions`, same order
        self._lines: dict[str, list[str]] = {}
        self._lower: dict[str, str] = {}
        self._search_index: SearchIndex | None = None
        self.nodes[REPO_ID] = Node(REPO_ID, NodeKind.REPO, repo, repo, "")

    # --- edges ------------------------------------------------------------------------------------------------
    def set_owned_edges(self, owner: str, edges: Iterable[Edge]) -> None:
        """Replace every edge `owner` contributed (a file's `path#contains` / `path#refs`, or the structure)."""
        out_index, in_index = self._out, self._in
        for edge in self._owned.pop(owner, ()):
            out_index.get(edge.src, {}).pop(edge, None)
            if edge.resolved:
                in_index.get(edge.dst, {}).pop(edge, None)
        unique = list(dict.fromkeys(edges))
        if unique:
            self._owned[owner] = unique
        bucket_src, bucket = None, None
        for edge in unique:  # a file's edges come grouped by source: look its bucket up once per group
            src, dst, _, resolved = edge
            if src != bucket_src:
                bucket_src, bucket = src, out_index.get(src)
                if bucket is None:
                    bucket = out_index[src] = {}
            bucket[edge] = None  # type: ignore[index]
            if resolved:
                incoming = in_index.get(dst)
                if incoming is None:
                    incoming = in_index[dst] = {}
                incoming[edge] = None

    def out_edges(self, node_id: str, kind: EdgeKind | None = None, resolved_only: bool = False) -> list[Edge]:
        return [e for e in self._out.get(node_id, ()) if (kind is None or e.kind == kind)
                and (e.resolved or not resolved_only)]

    def in_edges(self, node_id: str, kind: EdgeKind | None = None) -> list[Edge]:
        return [e for e in self._in.get(node_id, ()) if kind is None or e.kind == kind]

    def edges(self) -> Iterable[Edge]:
        for owned in self._owned.values():
            yield from owned

    def degree(self, node_id: str) -> int:
        return len(self._out.get(node_id, ())) + len(self._in.get(node_id, ()))

    # --- nodes ------------------------------------------------------------------------------------------------
    def node(self, node_id: str) -> Node:
        """The node; an unknown id raises UnknownNodeError (``query.node_or_error`` adds close ids to it)."""
        try:
            return self.nodes[node_id]
        except KeyError:
            raise UnknownNodeError(f"unknown node id {node_id!r} in the graph of {self.repo}@{self.commit or '?'}. "
                                   "Use explore_find to list real node ids.") from None

    def parent(self, node_id: str) -> str | None:
        for edge in self._in.get(node_id, ()):
            if edge.kind == EdgeKind.CONTAINS:
                return edge.src
        return None

    def children(self, node_id: str) -> list[str]:
        return [e.dst for e in self._out.get(node_id, ()) if e.kind == EdgeKind.CONTAINS]

    def file_lines(self, path: str) -> list[str]:
        lines = self._lines.get(path)
        if lines is None:
            lines = self._lines[path] = self.files.get(path, "").splitlines()
        return lines

    def search_index(self) -> SearchIndex:
        """Built on first use, dropped by every update."""
        if self._search_index is None:
            by_name: dict[str, list[str]] = {}
            by_qualname: dict[str, list[str]] = {}
            containers = []
            for node in self.nodes.values():
                if node.kind == NodeKind.REPO:
                    continue
                by_name.setdefault(node.name.lower(), []).append(node.id)
                by_qualname.setdefault(node.qualname.lower(), []).append(node.id)
                if node.kind in (NodeKind.FILE, NodeKind.TEXTFILE, NodeKind.PACKAGE):
                    containers.append(node)
            self._search_index = SearchIndex(by_name, by_qualname, containers)
        return self._search_index

    def lower_text(self, path: str) -> str:
        """Lower-cased file text, cached for case-insensitive text search."""
        text = self._lower.get(path)
        if text is None:
            text = self._lower[path] = self.files.get(path, "").lower()
        return text

    def module_names(self, path: str) -> list[str]:
        """Every module name `path` answers to (its module name and its repo-path alias)."""
        return [name for name in (self.module_of.get(path), self.module_alias.get(path)) if name]

    def innermost_at(self, path: str, line: int, kinds: Container[NodeKind] | None = None) -> str | None:
        """Id of the smallest class/function/attribute (of ``kinds``, when given) of `path` whose span holds `line`
        (else the file)."""
        best: Node | None = None
        for node_id in self.file_nodes.get(path, ())[1:]:
            node = self.nodes[node_id]
            if (kinds is None or node.kind in kinds) and node.start_line <= line <= node.end_line and (
                    best is None or node.end_line - node.start_line < best.end_line - best.start_line):
                best = node
        if best is not None:
            return best.id
        ids = self.file_nodes.get(path)
        return ids[0] if ids else None

    # --- bookkeeping used by the builder ----------------------------------------------------------------------
    def index_symbols(self, path: str) -> None:
        ordered = sorted((self.nodes[i] for i in self.file_nodes.get(path, ())[1:]),
                         key=lambda n: (n.start_line, n.id))
        table: dict[str, str] = {}
        for node in ordered:
            table.setdefault(node.qualname, node.id)
        self.symbols[path] = table

    def remove_file(self, path: str) -> None:
        for node_id in self.file_nodes.pop(path, ()):
            self.nodes.pop(node_id, None)
            self.class_bases.pop(node_id, None)
        for suffix in ("#contains", "#refs"):
            self.set_owned_edges(path + suffix, ())
        for table in (self.files, self.imports, self.deps, self.parse_errors, self.symbols, self._parsed,
                      self._def_ids, self._lines, self._lower):
            table.pop(path, None)

    # --- serialisation ----------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """A deterministic JSON-ready dict (sorted), so two graphs of the same files compare equal."""
        return {
            "version": BUILDER_VERSION,
            "repo": self.repo,
            "commit": self.commit,
            "engine": self.engine,
            "nodes": [self.nodes[i].to_dict() for i in sorted(self.nodes)],
            "edges": sorted(e.to_list() for e in self.edges()),
            "files": {p: self.files[p] for p in sorted(self.files)},
            "imports": {p: [[s.module, s.level, s.name, s.bound, s.line] for s in stmts]
                        for p, stmts in sorted(self.imports.items())},
            "class_bases": {i: list(b) for i, b in sorted(self.class_bases.items())},
            "deps": {p: [list(key) for key in sorted(d)] for p, d in sorted(self.deps.items())},
            "parse_errors": dict(sorted(self.parse_errors.items())),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CodeGraph:
        if data.get("version") != BUILDER_VERSION:
            raise ValueError(f"code graph JSON has builder version {data.get('version')!r}, this code writes "
                             f"{BUILDER_VERSION!r}: rebuild the graph (the cache does this automatically)")
        graph = cls(data["repo"], data.get("commit"))
        graph.engine = data.get("engine", "auto")
        graph.nodes = {}
        for row in data["nodes"]:
            node = Node.from_dict(row)
            graph.nodes[node.id] = node
        graph.files = dict(data["files"])
        graph.imports = {p: [ImportStmt(*row) for row in rows] for p, rows in data["imports"].items()}
        graph.class_bases = {i: tuple(b) for i, b in data["class_bases"].items()}
        graph.deps = {p: frozenset(tuple(key) for key in d) for p, d in data["deps"].items()}
        graph.parse_errors = dict(data.get("parse_errors", {}))
        for node in sorted(graph.nodes.values(), key=lambda n: (n.kind not in (NodeKind.FILE, NodeKind.TEXTFILE),
                                                                n.start_line, n.id)):
            if node.kind in (NodeKind.REPO, NodeKind.PACKAGE):
                continue
            graph.file_nodes.setdefault(node.path, []).append(node.id)
        owned: dict[str, list[Edge]] = {}
        for row in data["edges"]:
            edge = Edge.from_list(row)
            src = graph.nodes[edge.src]
            if src.kind in (NodeKind.REPO, NodeKind.PACKAGE):
                owner = STRUCTURE_OWNER
            else:
                owner = src.path + ("#contains" if edge.kind == EdgeKind.CONTAINS else "#refs")
            owned.setdefault(owner, []).append(edge)
        for owner, edges in owned.items():
            graph.set_owned_edges(owner, edges)
        for path in graph.file_nodes:
            graph.index_symbols(path)
        refresh_structure_index(graph)
        return graph

    def __repr__(self) -> str:
        return (f"CodeGraph({self.repo}@{self.commit or '?'}: {len(self.nodes)} nodes, "
                f"{sum(len(v) for v in self._owned.values())} edges, {len(self.files)} files)")


def refresh_structure_index(graph: CodeGraph) -> None:
    """Module names of Python files, from the package layout (directories holding __init__.py).

    A module's name starts below its top-most package's parent, so `src/pkg/mod.py` is `pkg.mod`; a file
    outside any package is a top-level module. The dotted repo path (`core/hub.py` -> `core.hub`) is also
    registered as an alias, for namespace packages (no __init__.py) imported from the repo root. When two files
    claim a name, the shorter path wins and real module names win over aliases.
    """
    graph.package_dirs = {posixpath.dirname(p) for p in graph.files if p.endswith("/__init__.py")}
    graph.module_of = {}
    graph.module_alias = {}
    graph.path_of_module = {}
    for path in sorted(graph.files, key=lambda p: (p.count("/"), p)):
        if not path.endswith(".py"):
            continue
        directory = posixpath.dirname(path)
        top = directory
        while top and top in graph.package_dirs:
            top = posixpath.dirname(top)
        relative = path[len(top) + 1:] if top else path
        parts = relative[:-3].split("/")
        if parts[-1] == "__init__":
            parts.pop()
        if not parts:
            continue
        module = ".".join(parts)
        graph.module_of[path] = module
        graph.path_of_module.setdefault(module, path)
        alias = path[:-3].replace("/", ".").removesuffix(".__init__")
        if alias != module and alias != "__init__":
            graph.module_alias[path] = alias
    for path, alias in sorted(graph.module_alias.items(), key=lambda item: (item[0].count("/"), item[0])):
        graph.path_of_module.setdefault(alias, path)
