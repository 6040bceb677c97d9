"""Build a CodeGraph from a repository's files (a mapping path -> content read out of the task's sandbox).

A full build is an incremental update from an empty graph, so `apply_changes` after a patch and a
fresh build of the patched files go through the same code and give the same graph.
"""

from __future__ import annotations

import gc
import posixpath
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from graph_planner.codegraph.graph import STRUCTURE_OWNER, CodeGraph, UpdateReport, refresh_structure_index
from graph_planner.codegraph.parser import Engine, ParsedModule, parse_python
from graph_planner.codegraph.resolve import DepKey, Resolver, file_interface, file_key, package_key
from graph_planner.codegraph.schema import (
    REPO_ID,
    Edge,
    EdgeKind,
    Node,
    NodeKind,
    file_id,
    package_id,
    symbol_id,
)

_CONTAINS = EdgeKind.CONTAINS  # enum attribute access is slow on 3.11; this runs per definition

#: Non-Python files that become TEXTFILE nodes (docs and configuration an issue may be about).
TEXT_SUFFIXES = frozenset({".md", ".rst", ".txt", ".cfg", ".toml", ".ini", ".yaml", ".yml", ".json"})
TEXT_NAMES = frozenset({"README", "LICENSE", "Makefile", "Dockerfile", "MANIFEST.in", "CHANGELOG", "AUTHORS"})


def normalise_path(path: str) -> str:
    clean = posixpath.normpath(path.replace("\\", "/")).lstrip("/")
    return "" if clean == "." else clean


def graph_kind_of(path: str) -> NodeKind | None:
    """FILE for Python sources, TEXTFILE for docs/config, None for files the graph ignores."""
    name = posixpath.basename(path)
    suffix = posixpath.splitext(name)[1].lower()
    if suffix == ".py":
        return NodeKind.FILE
    if suffix in TEXT_SUFFIXES or name in TEXT_NAMES or name.split(".")[0] in TEXT_NAMES:
        return NodeKind.TEXTFILE
    return None


def _decode(content: bytes | str) -> tuple[str, bytes]:
    if isinstance(content, str):
        return content, content.encode("utf-8", "surrogatepass")
    return content.decode("utf-8", "replace"), content


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def build_graph(files: Mapping[str, bytes | str], repo: str, commit: str | None = None,
                engine: Engine = "auto") -> CodeGraph:
    """Parse every Python file once (tree-sitter; `ast` only as a fallback) and resolve all edges."""
    graph = CodeGraph(repo, commit)
    graph.engine = engine
    apply_changes(graph, files)
    return graph


@contextmanager
def _gc_paused() -> Iterator[None]:
    """A build allocates ~10 objects per line of code and frees none of them, so CPython's cyclic GC would scan
    the growing heap again and again for nothing (~10-15% of build time). It is paused during the build, and the
    survivors (nearly all long-lived graph objects) are promoted straight to the oldest generation with
    freeze/unfreeze, an O(1) list move, instead of being scanned by a young-generation collection that would
    find nothing to free (~5% of a build). Cyclic garbage made meanwhile waits for the next full collection.
    When the host process froze objects itself (a pre-fork server), the promotion is skipped so as to leave
    its frozen set alone."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def apply_changes(graph: CodeGraph, changed: Mapping[str, bytes | str | None]) -> UpdateReport:
    """Replace the nodes of the changed files, then re-resolve the files whose edges may have changed."""
    with _gc_paused():
        return _apply_changes(graph, changed)


def _apply_changes(graph: CodeGraph, changed: Mapping[str, bytes | str | None]) -> UpdateReport:
    report = UpdateReport()
    engine = graph.engine
    graph._search_index = None
    old_packages = set(graph.package_dirs)
    affected: set[DepKey] = set()  # dependency keys whose answer may have changed
    old_interfaces: dict[str, dict[tuple, object]] = {}
    python_changed: list[str] = []
    first_build = not graph.file_nodes  # every file gets resolved: no need to diff interfaces
    for raw_path, content in changed.items():
        path = normalise_path(raw_path)
        if not path:
            continue
        kind = graph_kind_of(path)
        had_file = path in graph.file_nodes
        if path.endswith(".py") and not first_build:
            old_interfaces[path] = file_interface(graph, path) if had_file else {}
            if had_file and content is None:  # a module disappears
                affected.update(package_key(name) for name in graph.module_names(path))
        if had_file or path in graph.files:
            graph.remove_file(path)
        if content is None or kind is None:
            if had_file:
                report.changed.append(path)
            continue
        report.changed.append(path)
        text, data = _decode(content)
        graph.files[path] = text
        if kind == NodeKind.TEXTFILE:
            _add_text_file(graph, path, text)
        else:
            _add_python_file(graph, path, text, data, engine)
            python_changed.append(path)
    refresh_structure_index(graph)
    report.structure_changed = graph.package_dirs != old_packages
    _refresh_structure_edges(graph)
    if report.structure_changed:  # module names depend on the package layout: re-resolve everything
        to_resolve = sorted(p for p, n in graph.file_nodes.items() if graph.nodes[n[0]].kind == NodeKind.FILE)
    else:
        for path, before in old_interfaces.items():  # only what other files can see of a changed file matters
            after = file_interface(graph, path) if path in graph.file_nodes else {}
            if after != before:
                affected.add(file_key(path))
            if after and not before:  # a module appears
                affected.update(package_key(name) for name in graph.module_names(path))
        dependents = {p for p, deps in graph.deps.items() if not deps.isdisjoint(affected)}
        to_resolve = sorted(dependents.union(python_changed))
    for path in to_resolve:
        graph.nodes[file_id(path)].qualname = graph.module_of.get(path, path)
    resolver = Resolver(graph)
    for path in to_resolve:
        parsed = graph._parsed.get(path)
        if parsed is None:  # e.g. a graph loaded from JSON: parse lazily, from the stored text
            parsed = parse_python(graph.files[path], engine)
            graph._parsed[path] = parsed
        def_ids = graph._def_ids.get(path)
        if def_ids is None:
            def_ids = graph._def_ids[path] = definition_ids(path, parsed)
        edges, deps = resolver.resolve_file(path, parsed, def_ids)
        graph.set_owned_edges(path + "#refs", edges)
        graph.deps[path] = deps
    report.reresolved = to_resolve
    return report


def _add_text_file(graph: CodeGraph, path: str, text: str) -> None:
    # the first non-blank line; a bounded slice, as docs can be megabytes (the head keeps 160 characters)
    head = next(iter(text.lstrip()[:1000].splitlines()), "").strip()[:160]
    node = Node(file_id(path), NodeKind.TEXTFILE, posixpath.basename(path), path, path, 1, _line_count(text),
                "", head)
    graph.nodes[node.id] = node
    graph.file_nodes[path] = [node.id]
    graph.symbols[path] = {}


def definition_ids(path: str, parsed: ParsedModule) -> list[str]:
    """Node ids of a file's definitions, in parse order; a redefined name gets `@<line>` appended."""
    ids: list[str] = []
    seen: set[str] = set()
    for definition in parsed.definitions:
        node_id = symbol_id(definition.kind, path, definition.qualname)
        if node_id in seen:  # if/else branches, property setters: keep both, told apart by line
            node_id = f"{node_id}@{definition.start_line}"
        seen.add(node_id)
        ids.append(node_id)
    return ids


def _add_python_file(graph: CodeGraph, path: str, text: str, data: bytes, engine: Engine) -> None:
    parsed = parse_python(data, engine)
    graph._parsed[path] = parsed
    if parsed.error:
        graph.parse_errors[path] = parsed.error
    fid = file_id(path)
    graph.nodes[fid] = Node(fid, NodeKind.FILE, posixpath.basename(path), path, path, 1,
                            _line_count(text), "", parsed.doc_head)
    def_ids = graph._def_ids[path] = definition_ids(path, parsed)
    contains: list[Edge] = []
    new_edge = tuple.__new__  # Edge(...) runs a Python-level __new__; this is the same tuple, built in C
    for definition, node_id in zip(parsed.definitions, def_ids):
        graph.nodes[node_id] = Node(node_id, definition.kind, definition.name, definition.qualname, path,
                                    definition.start_line, definition.end_line, definition.signature,
                                    definition.doc_head)
        if definition.bases:
            graph.class_bases[node_id] = definition.bases
        parent = def_ids[definition.parent] if definition.parent >= 0 else fid
        contains.append(new_edge(Edge, (parent, node_id, _CONTAINS, True)))
    graph.file_nodes[path] = [fid, *def_ids]
    graph.imports[path] = parsed.imports
    graph.set_owned_edges(path + "#contains", contains)
    graph.index_symbols(path)


def _package_of(graph: CodeGraph, directory: str) -> str | None:
    """Nearest enclosing package directory of `directory` (itself included), None at the top."""
    while directory:
        if directory in graph.package_dirs:
            return directory
        directory = posixpath.dirname(directory)
    return None


def _refresh_structure_edges(graph: CodeGraph) -> None:
    for node_id in [i for i, n in graph.nodes.items() if n.kind == NodeKind.PACKAGE]:
        del graph.nodes[node_id]
    edges: list[Edge] = []
    for directory in sorted(graph.package_dirs):
        init = f"{directory}/__init__.py"
        graph.nodes[package_id(directory)] = Node(package_id(directory), NodeKind.PACKAGE,
                                                  posixpath.basename(directory),
                                                  graph.module_of.get(init, directory), directory)
        parent = _package_of(graph, posixpath.dirname(directory))
        edges.append(Edge(package_id(parent) if parent is not None else REPO_ID, package_id(directory),
                          EdgeKind.CONTAINS))
    for path in sorted(graph.file_nodes):
        parent = _package_of(graph, posixpath.dirname(path))
        edges.append(Edge(package_id(parent) if parent is not None else REPO_ID, file_id(path), EdgeKind.CONTAINS))
    graph.set_owned_edges(STRUCTURE_OWNER, edges)
