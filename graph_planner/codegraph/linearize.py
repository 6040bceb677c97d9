"""Turn a chosen set of graph nodes into what a patch synthesiser reads, within a token budget.

`linearize` gives text (nodes grouped by file: signature header + numbered code, then dependency edges);
`to_cgm_payload` gives the CodeFuse-CGM request shape ({"nodes": [...], "edges": [...]}) for the `cgm` service.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from graph_planner.codegraph.graph import CodeGraph
from graph_planner.codegraph.query import number_lines
from graph_planner.codegraph.schema import CGM_NODE_TYPE, REPO_ID, EdgeKind, Node, NodeKind

#: A tokenizer is a callable text -> token count, or an object with `encode(text)` (HF tokenizers).
Tokenizer = Callable[[str], int] | Any
_TEXTFILE_HEAD_LINES = 60
_MIN_SNIPPET_LINES = 3


def count_tokens(text: str, tokenizer: Tokenizer | None = None) -> int:
    """Tokens in `text`: the tokenizer's count when given, else the usual chars/4 estimate (rounded up)."""
    if tokenizer is None:
        return math.ceil(len(text) / 4)
    encode = getattr(tokenizer, "encode", None)
    if encode is None:
        return int(tokenizer(text))
    try:
        return len(encode(text, add_special_tokens=False))
    except TypeError:
        return len(encode(text))


def skeleton(graph: CodeGraph, path: str) -> list[str]:
    """Class and def signatures of a file, indented by nesting (what CGM's reranker shows of a file)."""
    lines = []
    for node_id in graph.file_nodes.get(path, ())[1:]:
        node = graph.nodes[node_id]
        if node.kind in (NodeKind.CLASS, NodeKind.FUNCTION):
            lines.append((node.start_line, "    " * node.qualname.count(".") + f"{node.signature}  # L{node.start_line}"))
    return [text for _, text in sorted(lines)]


def _code_lines(graph: CodeGraph, node: Node) -> tuple[list[str], int]:
    """(lines, first line number) that stand for the node's content."""
    if node.kind == NodeKind.FILE:
        return skeleton(graph, node.path), 0
    if node.kind == NodeKind.TEXTFILE:
        return graph.file_lines(node.path)[:_TEXTFILE_HEAD_LINES], 1
    if node.kind == NodeKind.PACKAGE:
        return sorted(graph.children(node.id)), 0
    return graph.file_lines(node.path)[node.start_line - 1:node.end_line], node.start_line


def _header(node: Node) -> str:
    span = f" (lines {node.start_line}-{node.end_line})" if node.start_line else ""
    label = node.signature or node.qualname
    doc = f"  # {node.doc_head}" if node.doc_head else ""
    return f"[{node.id}] {node.kind.value.lower()} {label}{span}{doc}"


def _render_body(lines: list[str], first: int, keep: int) -> str:
    shown = lines[:keep]
    body = number_lines(shown, first) if first else "\n".join(shown)
    if keep < len(lines):
        body += f"\n... ({len(lines) - keep} more lines)"
    return body


def _covering_ancestor(node: Node, chosen: list[Node]) -> Node | None:
    for other in chosen:
        if (other.id != node.id and other.path == node.path and other.kind in (NodeKind.CLASS, NodeKind.FUNCTION)
                and other.start_line <= node.start_line and node.end_line <= other.end_line
                and (other.start_line, -other.end_line) != (node.start_line, -node.end_line)):
            return other
    return None


@dataclass
class _Piece:
    node: Node
    text: str


def _dedupe(graph: CodeGraph, node_ids: Iterable[str]) -> list[Node]:
    seen: dict[str, Node] = {}
    for node_id in node_ids:
        node = graph.nodes.get(node_id)
        if node is not None and node.kind != NodeKind.REPO and node_id not in seen:
            seen[node_id] = node
    return list(seen.values())


def _dependency_lines(graph: CodeGraph, nodes: list[Node]) -> list[str]:
    selected = {n.id for n in nodes}
    lines = []
    for node in nodes:
        for edge in graph.out_edges(node.id, resolved_only=True):
            if edge.kind != EdgeKind.CONTAINS and edge.dst in selected:
                lines.append(f"{edge.src} --{edge.kind.value}--> {edge.dst}")
    return sorted(set(lines))


def _assemble(pieces: list[_Piece], dependencies: list[str]) -> str:
    by_file: dict[str, list[_Piece]] = {}
    for piece in pieces:
        by_file.setdefault(piece.node.path or "(packages)", []).append(piece)
    blocks = []
    for path, group in by_file.items():
        group.sort(key=lambda p: (p.node.start_line, p.node.id))
        blocks.append(f"### {path}\n" + "\n".join(p.text for p in group))
    if dependencies:
        blocks.append("### dependencies\n" + "\n".join(dependencies))
    return "\n\n".join(blocks)


def linearize(graph: CodeGraph, node_ids: Iterable[str], token_budget: int,
              tokenizer: Tokenizer | None = None) -> str:
    """Nodes in priority order (earlier ids win the budget), grouped by file, each with its header and numbered
    code (trimmed when the budget runs short), then the calls/imports/extends edges among them.

    The result never exceeds `token_budget` tokens; ids not in the graph (e.g. removed by a patch) are skipped.
    """
    nodes = _dedupe(graph, node_ids)
    pieces: list[_Piece] = []
    kept: list[Node] = []

    def fits(candidate: list[_Piece], deps: list[str]) -> bool:
        return count_tokens(_assemble(candidate, deps), tokenizer) <= token_budget

    for node in nodes:
        ancestor = _covering_ancestor(node, kept)
        header = _header(node)
        if ancestor is not None:
            candidate = _Piece(node, f"{header}\n(code shown in {ancestor.id})")
            if fits([*pieces, candidate], []):
                pieces.append(candidate)
                kept.append(node)
            continue
        lines, first = _code_lines(graph, node)
        full = _Piece(node, f"{header}\n{_render_body(lines, first, len(lines))}" if lines else header)
        if fits([*pieces, full], []):
            pieces.append(full)
            kept.append(node)
            continue
        low, high, best = _MIN_SNIPPET_LINES, len(lines) - 1, None
        while low <= high:  # longest prefix of the code that still fits
            middle = (low + high) // 2
            candidate = _Piece(node, f"{header}\n{_render_body(lines, first, middle)}")
            if fits([*pieces, candidate], []):
                best, low = candidate, middle + 1
            else:
                high = middle - 1
        if best is not None:
            pieces.append(best)
            kept.append(node)
    dependencies = _dependency_lines(graph, kept)
    while dependencies and not fits(pieces, dependencies):
        dependencies.pop()
    return _assemble(pieces, dependencies)


def _node_text(graph: CodeGraph, node: Node) -> str:
    lines, _ = _code_lines(graph, node)
    return "\n".join(lines) if node.kind not in (NodeKind.REPO, NodeKind.PACKAGE) else ""


def _contains_path(graph: CodeGraph, node_id: str) -> list[str]:
    chain = []
    current = graph.parent(node_id)
    while current is not None and current not in chain:
        chain.append(current)
        if current == REPO_ID:
            break
        current = graph.parent(current)
    return chain


def to_cgm_payload(graph: CodeGraph, node_ids: Iterable[str], budget: int,
                   tokenizer: Tokenizer | None = None) -> dict[str, list[dict[str, Any]]]:
    """The CodeFuse-CGM request graph: the chosen nodes plus their `contains` path up to REPO (CGM rebuilds the
    same connected subgraph), node texts trimmed in priority order to `budget` tokens, edges among them."""
    chosen = _dedupe(graph, node_ids)
    included: dict[str, Node] = {n.id: n for n in chosen}
    for node in chosen:
        for ancestor in _contains_path(graph, node.id):
            included.setdefault(ancestor, graph.nodes[ancestor])
    remaining = budget
    texts: dict[str, str] = {}
    for node in chosen:
        text = _node_text(graph, node)
        cost = count_tokens(text, tokenizer)
        if cost > remaining:
            lines = text.splitlines()
            while lines and count_tokens("\n".join(lines), tokenizer) > remaining:
                lines = lines[: len(lines) // 2] if len(lines) > 8 else lines[:-1]
            text = "\n".join(lines)
            cost = count_tokens(text, tokenizer)
        texts[node.id] = text
        remaining -= cost
    payload_nodes = [
        {"id": node.id, "nodeType": CGM_NODE_TYPE[node.kind], "name": node.name, "filePath": node.path,
         "startLine": node.start_line, "endLine": node.end_line, "text": texts.get(node.id, "")}
        for node in included.values()
    ]
    payload_edges = sorted(
        ({"src": e.src, "dst": e.dst, "edgeType": e.kind.value}
         for node_id in included for e in graph.out_edges(node_id, resolved_only=True) if e.dst in included),
        key=lambda e: (e["src"], e["dst"], e["edgeType"]),
    )
    return {"nodes": payload_nodes, "edges": payload_edges}
