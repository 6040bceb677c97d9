"""Resolve a file's imports, base classes and calls to graph nodes (best effort; unresolved names are kept).

Python name lookup is approximated statically: enclosing function scopes, the module's own definitions, its
imports (absolute, relative, star, re-exports followed through packages) and class members through resolved
bases. Every fact a lookup consults is recorded as a dependency key (see "dependency keys" below), so an
incremental update re-resolves only the files that consulted something a patch changed.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from graph_planner.codegraph.graph import CodeGraph
from graph_planner.codegraph.parser import ParsedModule
from graph_planner.codegraph.schema import Edge, EdgeKind, NodeKind, file_id

_BUILTINS = frozenset(dir(builtins))
# enum attribute access is slow on 3.11; these run per call site
_CLASS, _FUNCTION, _FILE = NodeKind.CLASS, NodeKind.FUNCTION, NodeKind.FILE
_CALL_TARGETS = frozenset({NodeKind.FUNCTION, NodeKind.CLASS, NodeKind.ATTRIBUTE})
_CALLS, _EXTENDS, _IMPORTS = EdgeKind.CALLS, EdgeKind.EXTENDS, EdgeKind.IMPORTS
_METHOD_HEADS = ("self", "cls", "super()")  # calls resolved through the enclosing class
T = TypeVar("T")

# --- dependency keys: what a lookup consulted, coarse enough to stay small --------------------------------------
# A lookup can go through hundreds of modules (star-import chains of big packages), so keys are per file and per
# package rather than per name; `file_interface` keeps a body-only edit from invalidating anything.

DepKey = tuple[str, str]


def file_key(path: str) -> DepKey:
    """Any definition, import binding, star import or base-class list of the file `path`."""
    return ("f", path)


def package_key(module: str) -> DepKey:
    """Which modules exist directly under the parent package of `module` (a module appearing or vanishing)."""
    return ("p", module.rpartition(".")[0])


def file_interface(graph: CodeGraph, path: str) -> dict[tuple, object]:
    """What other files can see of a Python file (names with id and kind, import bindings, star imports, base
    classes). When a patch leaves it unchanged (a body-only edit), no other file needs re-resolving."""
    facts: dict[tuple, object] = {}
    for qualname, node_id in graph.symbols.get(path, {}).items():
        facts[("name", qualname)] = (node_id, graph.nodes[node_id].kind.value)
    stars = []
    for stmt in graph.imports.get(path, ()):
        if stmt.name == "*":
            stars.append((stmt.module, stmt.level))
        else:
            key = ("name", stmt.bound)
            facts[key] = (facts.get(key), stmt.module, stmt.level, stmt.name)
    facts[("stars",)] = tuple(stars)
    for node_id in graph.file_nodes.get(path, ()):
        if node_id in graph.class_bases:
            facts[("bases", node_id)] = graph.class_bases[node_id]
    return facts


class _Frame:
    """Dependencies of one lookup in progress: keys it touched itself, plus the (shared, frozen) dependency sets
    of memoised lookups it reused, merged once at the end instead of copied on every reuse."""

    __slots__ = ("cut", "deps", "subs")

    def __init__(self) -> None:
        self.deps: set[DepKey] = set()
        self.subs: dict[int, frozenset[DepKey]] = {}
        self.cut = False

    def flatten(self) -> frozenset[DepKey]:
        if not self.subs:
            return frozenset(self.deps)
        if len(self.subs) == 1:  # common: a lookup that only forwarded to another one
            (only,) = self.subs.values()
            if self.deps.issubset(only):
                return only
        return frozenset(self.deps).union(*self.subs.values())  # one copy: the union is built as a frozenset


@dataclass(frozen=True, slots=True)
class _Binding:
    module: str  # absolute dotted module
    name: str | None  # None: the binding is the module itself


class Resolver:
    """One resolution pass over a graph whose nodes are final; memoises lookups together with their deps."""

    def __init__(self, graph: CodeGraph) -> None:
        self.graph = graph
        self._frames: list[_Frame] = []
        self._in_progress: set[tuple] = set()
        self._memo: dict[tuple, tuple[object, frozenset[DepKey]]] = {}
        self._bindings: dict[str, tuple[dict[str, _Binding], list[str]]] = {}
        self._packages: dict[str, list[str]] = {}  # path -> its package as dotted parts

    # --- dependency tracking ----------------------------------------------------------------------------------
    def _touch(self, key: DepKey) -> None:
        if self._frames:
            self._frames[-1].deps.add(key)

    def _reuse(self, deps: frozenset[DepKey]) -> None:
        if deps and self._frames:
            self._frames[-1].subs[id(deps)] = deps

    def _memoised(self, key: tuple, compute: Callable[[], T | None]) -> T | None:
        """Memoise a lookup with the facts it consulted. A lookup that meets itself (import or inheritance
        cycle) answers None and is not memoised, so every stored answer is independent of evaluation order and an
        incremental update resolves exactly like a full build."""
        hit = self._memo.get(key)
        if hit is not None:
            self._reuse(hit[1])
            return hit[0]  # type: ignore[return-value]
        if key in self._in_progress:
            if self._frames:
                self._frames[-1].cut = True
            return None
        self._in_progress.add(key)
        frame = _Frame()
        self._frames.append(frame)
        try:
            value = compute()
        finally:
            self._frames.pop()
            self._in_progress.discard(key)
        deps = frame.flatten()
        self._reuse(deps)
        if self._frames:
            self._frames[-1].cut |= frame.cut
        if not frame.cut:
            self._memo[key] = (value, deps)
        return value

    # --- modules and bindings ---------------------------------------------------------------------------------
    def absolute_module(self, path: str, module: str, level: int) -> str | None:
        if level == 0:
            return module
        package = self._packages.get(path)
        if package is None:
            own = self.graph.module_of.get(path)
            if own is None:
                return None
            package = self._packages[path] = own.split(".") if path.endswith("__init__.py") else own.split(".")[:-1]
        if not package or level - 1 >= len(package):  # beyond the top-level package
            return None
        base = package[: len(package) - (level - 1)]
        return ".".join(base + ([module] if module else []))

    def _file_bindings(self, path: str) -> tuple[dict[str, _Binding], list[str]]:
        cached = self._bindings.get(path)
        if cached is not None:
            return cached
        table: dict[str, _Binding] = {}
        stars: list[str] = []
        for stmt in self.graph.imports.get(path, ()):
            if stmt.name is None:
                first = stmt.module.split(".")[0]
                table[stmt.bound] = _Binding(first if stmt.bound == first else stmt.module, None)
                continue
            module = self.absolute_module(path, stmt.module, stmt.level)
            if module is None:
                continue
            if stmt.name == "*":
                stars.append(module)
            else:
                table[stmt.bound] = _Binding(module, stmt.name)
        self._bindings[path] = (table, stars)
        return table, stars

    def module_path(self, module: str) -> str | None:
        self._touch(package_key(module))
        return self.graph.path_of_module.get(module)

    # --- lookups ----------------------------------------------------------------------------------------------
    def lookup_module(self, module: str, parts: tuple[str, ...]) -> str | None:
        """Node id of `module.parts...` (a module's own name, a re-export, or a submodule; FILE id for `()`)."""
        key = ("m", module, parts)
        hit = self._memo.get(key)  # the common case, without building a closure
        if hit is not None:
            self._reuse(hit[1])
            return hit[0]  # type: ignore[return-value]
        return self._memoised(key, lambda: self._lookup_module(module, parts))

    def _lookup_module(self, module: str, parts: tuple[str, ...]) -> str | None:
        path = self.module_path(module)
        if not parts:
            return file_id(path) if path is not None else None
        # a submodule first: importing it binds it on the package, and it spares a walk through the package's
        # star imports (hundreds of modules in big packages)
        submodule = f"{module}.{parts[0]}"
        if self.module_path(submodule) is not None:
            return self.lookup_module(submodule, parts[1:])
        return self.lookup_file(path, parts) if path is not None else None

    def lookup_file(self, path: str, parts: tuple[str, ...]) -> str | None:
        """Node id of a dotted name at module level of `path`: its head is looked up once per file (memoised),
        the rest walks class members or submodules."""
        head = self.lookup_name(path, parts[0])
        if head is None or len(parts) == 1:
            return head
        return self.walk(head, parts[1:])

    def lookup_name(self, path: str, name: str) -> str | None:
        """What a module-level name of `path` refers to (definition, import binding, star import)."""
        key = ("h", path, name)
        hit = self._memo.get(key)
        if hit is not None:
            self._reuse(hit[1])
            return hit[0]  # type: ignore[return-value]
        return self._memoised(key, lambda: self._lookup_name(path, name))

    def _lookup_name(self, path: str, name: str) -> str | None:
        self._touch(file_key(path))
        own = self.graph.symbols.get(path, {}).get(name)
        if own is not None:
            return own
        table, stars = self._file_bindings(path)
        binding = table.get(name)
        if binding is not None:
            return self.lookup_module(binding.module, () if binding.name is None else (binding.name,))
        if name in _BUILTINS:  # `len`, `set`...: not worth a walk through every star import
            return None
        for module in stars:
            found = self.lookup_module(module, (name,))
            if found is not None:
                return found
        return None

    def walk(self, node_id: str, rest: tuple[str, ...]) -> str | None:
        """Continue a dotted name from a node: into a class's members or a module's names."""
        node = self.graph.nodes[node_id]
        if node.kind == _CLASS:
            return self.descend(node_id, rest)
        if node.kind == _FILE:
            module = self.graph.module_of.get(node.path)
            return self.lookup_module(module, rest) if module is not None else None
        return None

    def descend(self, node_id: str, rest: tuple[str, ...]) -> str | None:
        for part in rest:
            if self.graph.nodes[node_id].kind != _CLASS:
                return None
            member = self.member(node_id, part)
            if member is None:
                return None
            node_id = member
        return node_id

    def member(self, class_id: str, name: str) -> str | None:
        """A class member by name, searching resolved base classes depth-first (a static stand-in for the MRO)."""
        key = ("c", class_id, name)
        hit = self._memo.get(key)
        if hit is not None:
            self._reuse(hit[1])
            return hit[0]  # type: ignore[return-value]
        return self._memoised(key, lambda: self._member(class_id, name))

    def _member(self, class_id: str, name: str) -> str | None:
        node = self.graph.nodes[class_id]
        member = f"{node.qualname}.{name}"
        self._touch(file_key(node.path))
        direct = self.graph.symbols.get(node.path, {}).get(member)
        if direct is not None:
            return direct
        for base in self.bases(class_id) or ():
            if base.resolved:
                found = self.member(base.dst, name)
                if found is not None:
                    return found
        return None

    def bases(self, class_id: str) -> list[Edge]:
        """`extends` edges of a class (resolved to CLASS nodes, else kept as the written name)."""
        key = ("b", class_id)
        hit = self._memo.get(key)  # the common case, without building a closure
        if hit is not None:
            self._reuse(hit[1])
            return hit[0]  # type: ignore[return-value]
        return self._memoised(key, lambda: self._bases(class_id))

    def _bases(self, class_id: str) -> list[Edge]:
        node = self.graph.nodes[class_id]
        self._touch(file_key(node.path))
        scope = node.qualname.rpartition(".")[0]
        edges = []
        for name in self.graph.class_bases.get(class_id, ()):
            target = self.resolve_in_scope(node.path, scope, tuple(name.split(".")))
            if target is not None and target != class_id and self.graph.nodes[target].kind == _CLASS:
                edges.append(Edge(class_id, target, _EXTENDS))
            else:
                edges.append(Edge(class_id, name, _EXTENDS, resolved=False))
        return edges

    def resolve_in_scope(self, path: str, scope: str, parts: tuple[str, ...]) -> str | None:
        """Resolve a dotted name used inside `scope` (a qualname, '' for module level) of `path`."""
        symbols = self.graph.symbols.get(path, {})
        self._touch(file_key(path))
        qual = scope
        innermost = True
        while qual:
            scope_id = symbols.get(qual)
            if scope_id is not None:
                kind = self.graph.nodes[scope_id].kind
                # class bodies are visible only to code directly inside them, not to their methods
                if kind == _FUNCTION or (innermost and kind == _CLASS):
                    local_name = f"{qual}.{parts[0]}"
                    local = symbols.get(local_name)
                    if local is not None:
                        return self.descend(local, parts[1:])
            innermost = False
            qual = qual.rpartition(".")[0]
        return self.lookup_file(path, parts)

    # --- one file ---------------------------------------------------------------------------------------------
    def resolve_file(self, path: str, parsed: ParsedModule,
                     def_ids: list[str]) -> tuple[list[Edge], frozenset[DepKey]]:
        """imports / extends / calls edges of `path` and the dependency keys its resolution consulted."""
        frame = _Frame()
        self._frames.append(frame)
        try:
            edges = self._import_edges(path)
            for node_id in def_ids:
                if self.graph.nodes[node_id].kind == _CLASS:
                    edges.extend(self.bases(node_id) or ())
            edges.extend(self._call_edges(path, parsed, def_ids))
        finally:
            self._frames.pop()
        return edges, frame.flatten()

    def _import_edges(self, path: str) -> list[Edge]:
        src = file_id(path)
        edges: list[Edge] = []
        for stmt in self.graph.imports.get(path, ()):
            module = self.absolute_module(path, stmt.module, stmt.level)
            if module is None:
                edges.append(Edge(src, "." * stmt.level + stmt.module, _IMPORTS, resolved=False))
                continue
            target = None
            if stmt.name not in (None, "*"):
                target = self.module_path(f"{module}.{stmt.name}")
            if target is None:
                target = self.module_path(module)
            if target is not None and target != path:
                edges.append(Edge(src, file_id(target), _IMPORTS))
            elif target is None:
                edges.append(Edge(src, module, _IMPORTS, resolved=False))
        return edges

    def _call_edges(self, path: str, parsed: ParsedModule, def_ids: list[str]) -> list[Edge]:
        nodes = self.graph.nodes
        src_file = file_id(path)
        # names defined inside functions/classes of this file: only those make a call depend on its scope
        nested = {d.name for d in parsed.definitions if d.parent >= 0}
        own_symbols = self.graph.symbols.get(path, {})
        # callee -> its call target (None: none that is callable), for callees whose answer is scope-free
        module_level: dict[str, str | None] = {}
        edges: list[Edge] = []
        owners: dict[int, str | None] = {}  # scope index -> enclosing class id
        new_edge = tuple.__new__  # Edge(...) runs a Python-level __new__; this is the same tuple, built in C
        for scope_index, callee in parsed.calls:  # distinct (scope, callee) pairs, as the parser gives them
            src = def_ids[scope_index] if scope_index >= 0 else src_file
            if callee in module_level:
                target = module_level[callee]
            else:
                parts = tuple(callee.split("."))
                head = parts[0]
                if head in _METHOD_HEADS:
                    if scope_index not in owners:
                        owners[scope_index] = self._enclosing_class(scope_index, parsed, def_ids)
                    target = self._resolve_method_call(parts, owners[scope_index])
                elif scope_index >= 0 and head in nested:
                    target = self.resolve_in_scope(path, nodes[src].qualname, parts)
                else:  # own scopes cannot change without re-resolving this file: go straight to module level
                    target = self._lookup_own(path, own_symbols, parts)
                if target is not None and nodes[target].kind not in _CALL_TARGETS:
                    target = None
                if head not in nested and head not in _METHOD_HEADS:  # the same answer in every scope
                    module_level[callee] = target
            if target is not None:
                if target != src:
                    edges.append(new_edge(Edge, (src, target, _CALLS, True)))
            elif callee not in _BUILTINS:
                edges.append(new_edge(Edge, (src, callee, _CALLS, False)))
        return edges

    def _lookup_own(self, path: str, own_symbols: dict[str, str], parts: tuple[str, ...]) -> str | None:
        """`lookup_file` for the file being resolved: its own definitions are read directly, untracked (a change
        to them re-resolves this file anyway); imports go through the memoised, tracked lookups."""
        head = own_symbols.get(parts[0])
        if head is None:  # not memoised: the file's own lookups rarely repeat (its callees are cached per file)
            head = self._lookup_name(path, parts[0])
        if head is None or len(parts) == 1:
            return head
        return self.walk(head, parts[1:])

    def _enclosing_class(self, scope_index: int, parsed: ParsedModule, def_ids: list[str]) -> str | None:
        index = scope_index
        while index >= 0:
            definition = parsed.definitions[index]
            if definition.kind == _CLASS:
                return def_ids[index]
            index = definition.parent
        return None

    def _resolve_method_call(self, parts: tuple[str, ...], owner: str | None) -> str | None:
        """`self.m()` / `cls.m()` in a class's methods, `super().m()` through its resolved bases."""
        if len(parts) != 2 or owner is None:
            return None
        if parts[0] != "super()":
            return self.member(owner, parts[1])
        for base in self.bases(owner) or ():
            if base.resolved:
                found = self.member(base.dst, parts[1])
                if found is not None:
                    return found
        return None
