"""Which functions and classes to mutate: the code graph's definitions outside the test files that the tests reach.

The static call graph resolves plain calls (``normalize_sku(x)``) but not most method calls (``cart.total()``), so
"reached" is: reachable over resolved ``calls`` edges from a test, or defined in a module the tests import
(transitively) and named by some call in the repository (the last part of an unresolved call such as
``self.tax_table.tax_for``), or a dunder of such a module (operators, ``__init__``). Running the tests decides the
rest: a mutation no test notices is discarded at validation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from graph_planner.codegraph import CodeGraph, EdgeKind, NodeKind, build_graph, load_files_from_dir


@dataclass(frozen=True)
class Target:
    node_id: str
    kind: str  # "function" | "class"
    path: str
    qualname: str


def is_test_path(path: str) -> bool:
    """pytest's default discovery names plus a ``tests``/``test`` directory anywhere on the path."""
    parts = path.split("/")
    name = parts[-1]
    return (any(p in ("tests", "test", "testing") for p in parts[:-1]) or name.startswith("test_")
            or name.endswith("_test.py") or name == "conftest.py")


def repo_graph(root: str | Path, name: str) -> CodeGraph:
    return build_graph(load_files_from_dir(root), name)


def find_targets(graph: CodeGraph) -> list[Target]:
    """Covered definitions in a stable order (by node id)."""
    test_nodes = [n.id for n in graph.nodes.values() if n.path and is_test_path(n.path)
                  and n.kind in (NodeKind.FILE, NodeKind.FUNCTION, NodeKind.CLASS)]
    reached: set[str] = set()
    stack = list(test_nodes)
    while stack:
        for edge in graph.out_edges(stack.pop(), EdgeKind.CALLS, resolved_only=True):
            if edge.dst not in reached:
                reached.add(edge.dst)
                stack.append(edge.dst)
    imported: set[str] = set()
    stack = [n for n in test_nodes if n.startswith("file:")]
    while stack:
        for edge in graph.out_edges(stack.pop(), EdgeKind.IMPORTS, resolved_only=True):
            if edge.dst.startswith("file:") and edge.dst not in imported:
                imported.add(edge.dst)
                stack.append(edge.dst)
    called = {e.dst.rsplit(".", 1)[-1] for e in graph.edges() if e.kind == EdgeKind.CALLS}
    targets = []
    for node in sorted(graph.nodes.values(), key=lambda n: n.id):
        if node.kind not in (NodeKind.FUNCTION, NodeKind.CLASS) or not node.path or is_test_path(node.path):
            continue
        in_imported = f"file:{node.path}" in imported
        dunder = node.name.startswith("__") and node.name.endswith("__")
        if node.kind == NodeKind.CLASS:
            if in_imported:
                targets.append(Target(node.id, "class", node.path, node.qualname))
        elif node.id in reached or (in_imported and (node.name in called or dunder)):
            targets.append(Target(node.id, "function", node.path, node.qualname))
    return targets
