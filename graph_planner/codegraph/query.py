"""Planner-facing queries over a CodeGraph: `find` (names, paths, terms, text), `expand` (ranked, directory-diverse
neighbourhood) and `read` (real code with 1-based line numbers)."""

from __future__ import annotations

import fnmatch
import math
import posixpath
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

from graph_planner.codegraph.graph import CodeGraph, SearchIndex, UnknownNodeError
from graph_planner.codegraph.schema import REPO_ID, EdgeKind, Node, NodeKind

_SYMBOL_KINDS = (NodeKind.CLASS, NodeKind.FUNCTION, NodeKind.ATTRIBUTE)
_CONTAINER_KINDS = (NodeKind.FILE, NodeKind.TEXTFILE, NodeKind.PACKAGE)
_KIND_ORDER = {NodeKind.FUNCTION: 0, NodeKind.CLASS: 1, NodeKind.FILE: 2, NodeKind.ATTRIBUTE: 3,
               NodeKind.TEXTFILE: 4, NodeKind.PACKAGE: 5, NodeKind.REPO: 6}
_TOKEN = re.compile(r"""([+-]?)(?:(symbol|path):)?(?:"([^"]*)"|'([^']*)'|(\S+))""")
_MAX_TEXT_HITS = 5000
_TEST_PART = re.compile(r"(^|/)(tests?|testing)(/|$)|(^|/)test_[^/]*$|_tests?\.py$|(^|/)conftest\.py$")


@lru_cache(maxsize=65536)
def is_test_path(path: str) -> bool:
    return bool(_TEST_PART.search(path))


@dataclass
class ParsedQuery:
    terms: list[str] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)


def parse_query(text: str) -> ParsedQuery:
    """`symbol:X`, `path:X`, `"a phrase"`, `+must`, `-mustnot` and plain words (all case-insensitive)."""
    query = ParsedQuery()
    for sign, prefix, dq, sq, word in _TOKEN.findall(text):
        quoted = dq or sq
        value = (quoted if quoted else word).strip().lower()
        if not value:
            continue
        if sign == "+":
            query.required.append(value)
        elif sign == "-":
            query.excluded.append(value)
        elif prefix == "symbol":
            query.symbols.append(value)
        elif prefix == "path":
            query.paths.append(value)
        elif quoted:
            query.phrases.append(value)
        else:
            query.terms.append(value)
    return query


@dataclass
class FindHit:
    node: Node
    score: float
    reasons: list[str]


def _name_score(node: Node, term: str) -> tuple[float, str] | None:
    name = node.name.lower()
    qualname = node.qualname.lower()
    if name == term or qualname == term:
        return 10.0, f"name = {term!r}"
    if "." in term and qualname.endswith("." + term):
        return 8.0, f"qualname ends with {term!r}"
    if name.startswith(term):
        return 6.0, f"name starts with {term!r}"
    if term in name:
        return 3.0, f"name contains {term!r}"
    if "." in term and term in qualname:
        return 3.0, f"qualname contains {term!r}"
    return None


def _name_matches(index: SearchIndex, term: str) -> dict[str, tuple[float, str]]:
    """node id -> best (score, reason) of `_name_score`, computed once per distinct name, not per node."""
    best: dict[str, tuple[float, str]] = {}

    def offer(ids: list[str], score: float, reason: str) -> None:
        for node_id in ids:
            if node_id not in best or best[node_id][0] < score:
                best[node_id] = (score, reason)

    if "." not in term:  # names have no dots
        for name, ids in index.by_name.items():
            if name == term:
                offer(ids, 10.0, f"name = {term!r}")
            elif name.startswith(term):
                offer(ids, 6.0, f"name starts with {term!r}")
            elif term in name:
                offer(ids, 3.0, f"name contains {term!r}")
        offer(index.by_qualname.get(term, []), 10.0, f"name = {term!r}")
        return best
    for qualname, ids in index.by_qualname.items():
        if qualname == term:
            offer(ids, 10.0, f"name = {term!r}")
        elif qualname.endswith("." + term):
            offer(ids, 8.0, f"qualname ends with {term!r}")
        elif term in qualname:
            offer(ids, 3.0, f"qualname contains {term!r}")
    return best


def _path_score(node: Node, term: str) -> tuple[float, str] | None:
    if node.kind not in _CONTAINER_KINDS:
        return None
    path = node.path.lower()
    base = posixpath.basename(path)
    if path == term or base == term or posixpath.splitext(base)[0] == term or path.endswith("/" + term):
        return 5.0, f"path matches {term!r}"
    if term in path:
        return 2.0, f"path contains {term!r}"
    return None


def _path_matches(path: str, pattern: str) -> bool:
    path = path.lower()
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, f"*/{pattern}")
    return pattern in path


def text_hits(graph: CodeGraph, needle: str, limit: int = _MAX_TEXT_HITS) -> dict[str, int]:
    """node id -> first line where `needle` (lower-case) occurs in that node's own code (innermost node).

    Files are visited by how often they mention the needle (most first), so the `limit` on occurrences keeps
    the files that matter rather than the alphabetically first ones.
    """
    hits: dict[str, int] = {}
    found = 0
    counts = [(count, path) for path in graph.files if (count := graph.lower_text(path).count(needle))]
    for _, path in sorted(counts, key=lambda item: (-item[0], item[1])):
        text = graph.lower_text(path)
        position = text.find(needle)
        lines: list[int] = []
        line, counted_to = 1, 0
        while position >= 0 and found < limit:
            line += text.count("\n", counted_to, position)
            counted_to = position
            lines.append(line)
            found += 1
            next_newline = text.find("\n", position)
            if next_newline < 0:
                break
            position = text.find(needle, next_newline + 1)
        for line in lines:
            node_id = graph.innermost_at(path, line)
            if node_id is not None:
                hits.setdefault(node_id, line)
        if found >= limit:
            break
    return hits


def find(graph: CodeGraph, query: str, limit: int = 20) -> list[FindHit]:
    """Nodes ranked by: names (exact > prefix > substring), paths, code text; filters by +/-/symbol:/path:."""
    parsed = parse_query(query)
    scores: dict[str, float] = defaultdict(float)
    reasons: dict[str, list[str]] = defaultdict(list)
    name_terms = parsed.terms + parsed.symbols
    index = graph.search_index()
    for term in name_terms:
        matched = _name_matches(index, term)
        if term in parsed.terms:
            for node in index.containers:
                if node.id not in matched:
                    hit = _path_score(node, term)
                    if hit is not None:
                        matched[node.id] = hit
        for node_id, (score, reason) in matched.items():
            scores[node_id] += score
            reasons[node_id].append(reason)
    if not name_terms and not parsed.phrases and parsed.paths:
        for node in index.containers:
            if all(_path_matches(node.path, p) for p in parsed.paths):
                scores[node.id] += 5.0
                reasons[node.id].append("path matches " + ", ".join(repr(p) for p in parsed.paths))
    for term in [t for t in parsed.terms if len(t) >= 3] + parsed.phrases:
        weight = 4.0 if term in parsed.phrases else 1.0
        for node_id, line in text_hits(graph, term).items():
            scores[node_id] += weight
            reasons[node_id].append(f"text {term!r} at line {line}")
    candidates = set(scores)
    if not candidates and (parsed.required or parsed.symbols):
        candidates = set(graph.nodes)
    required_hits = [set(text_hits(graph, term)) for term in parsed.required]
    excluded_hits = [set(text_hits(graph, term)) for term in parsed.excluded]
    results: list[FindHit] = []
    for node_id in candidates:
        node = graph.nodes[node_id]
        if node.kind == NodeKind.REPO:
            continue
        if parsed.symbols and (node.kind not in _SYMBOL_KINDS or not all(
                _name_score(node, s) is not None for s in parsed.symbols)):
            continue
        if parsed.paths and not all(_path_matches(node.path, p) for p in parsed.paths):
            continue
        haystack = f"{node.qualname}\n{node.path}".lower()
        if any(term not in haystack and node_id not in hits for term, hits in zip(parsed.required, required_hits)):
            continue
        if any(term in haystack or node_id in hits for term, hits in zip(parsed.excluded, excluded_hits)):
            continue
        score = scores.get(node_id, 0.0) + (1.0 if parsed.required else 0.0)
        if score <= 0:
            continue
        if is_test_path(node.path):
            score *= 0.9
        results.append(FindHit(node, round(score, 3), reasons.get(node_id, ["matches all +terms"])))
    results.sort(key=lambda h: (-h.score, _KIND_ORDER[h.node.kind], is_test_path(h.node.path), h.node.path,
                                h.node.id))
    return results[:limit]


# --- expand ---------------------------------------------------------------------------------------------------

#: (edge kind, direction) -> weight; direction "out" follows src->dst, "in" goes back from dst to src.
EDGE_WEIGHTS = {
    (EdgeKind.CALLS, "out"): 1.0, (EdgeKind.CALLS, "in"): 0.9,
    (EdgeKind.EXTENDS, "out"): 1.0, (EdgeKind.EXTENDS, "in"): 0.8,
    (EdgeKind.IMPORTS, "out"): 0.6, (EdgeKind.IMPORTS, "in"): 0.5,
    (EdgeKind.CONTAINS, "out"): 0.7, (EdgeKind.CONTAINS, "in"): 0.8,
}
_MAX_FRONTIER = 2000


@dataclass
class ExpandHit:
    node: Node
    score: float
    hop: int
    edge: EdgeKind
    direction: str  # "out" (the origin side points at it) or "in" (it points at the origin side)
    via: str  # the node it was reached from


def expand(graph: CodeGraph, node_id: str, hop: int = 1, limit: int = 20) -> list[ExpandHit]:
    """Neighbours within `hop` edges (all kinds, both directions), ranked by edge kind, same file, degree and a
    preference for non-test code, then interleaved round-robin over directories so one folder cannot fill the
    list."""
    origin = node_or_error(graph, node_id)
    origin_is_test = is_test_path(origin.path)
    best: dict[str, ExpandHit] = {}
    extra: dict[str, int] = defaultdict(int)
    frontier = [node_id]
    seen = {node_id}
    for distance in range(1, max(1, hop) + 1):
        next_frontier: list[str] = []
        for current in frontier:
            neighbours = [(e.dst, e.kind, "out") for e in graph.out_edges(current, resolved_only=True)]
            neighbours += [(e.src, e.kind, "in") for e in graph.in_edges(current)]
            for other, kind, direction in neighbours:
                if other == node_id or other == REPO_ID:
                    continue
                node = graph.nodes[other]
                score = EDGE_WEIGHTS[(kind, direction)] / distance
                score += 0.3 if node.path == origin.path else 0.0
                score += 0.1 * math.log1p(graph.degree(other))
                if is_test_path(node.path) and not origin_is_test:
                    score *= 0.6
                previous = best.get(other)
                if previous is None or score > previous.score:
                    best[other] = ExpandHit(node, score, distance, kind, direction, current)
                extra[other] += 1
                if other not in seen:
                    seen.add(other)
                    next_frontier.append(other)
        if len(next_frontier) > _MAX_FRONTIER:  # hubs (packages, popular helpers): keep the strongest
            next_frontier.sort(key=lambda i: (-best[i].score, i))
            next_frontier = next_frontier[:_MAX_FRONTIER]
        frontier = next_frontier
    for other, hit in best.items():
        hit.score = round(hit.score + 0.05 * (extra[other] - 1), 4)
    return diversify(list(best.values()), limit)


def diversify(hits: list[ExpandHit], limit: int) -> list[ExpandHit]:
    """Round-robin over directories (groups ordered by their best hit), best first inside each group."""
    groups: dict[str, list[ExpandHit]] = defaultdict(list)
    for hit in sorted(hits, key=lambda h: (-h.score, h.node.id)):
        directory = hit.node.path if hit.node.kind == NodeKind.PACKAGE else posixpath.dirname(hit.node.path)
        groups[directory].append(hit)
    ordered = sorted(groups.values(), key=lambda g: (-g[0].score, g[0].node.id))
    out: list[ExpandHit] = []
    depth = 0
    while len(out) < limit and any(depth < len(g) for g in ordered):
        for group in ordered:
            if depth < len(group) and len(out) < limit:
                out.append(group[depth])
        depth += 1
    return out


# --- read -----------------------------------------------------------------------------------------------------

@dataclass
class ReadResult:
    node_id: str
    path: str
    start_line: int
    end_line: int
    text: str  # numbered lines "  12 | code"
    truncated: bool = False


def number_lines(lines: list[str], first: int) -> str:
    width = len(str(first + len(lines) - 1)) if lines else 1
    return "\n".join(f"{n:>{width}} | {line}" for n, line in enumerate(lines, start=first))


def read(graph: CodeGraph, node_id: str, context_lines: int = 0, max_lines: int | None = None) -> ReadResult:
    """The node's real code, 1-based numbered, with `context_lines` around it; PACKAGE reads its __init__.py."""
    node = node_or_error(graph, node_id)
    if node.kind == NodeKind.REPO:
        listing = sorted(graph.children(REPO_ID))
        return ReadResult(node_id, "", 0, 0, "\n".join(listing))
    path = node.path
    start, end = node.start_line, node.end_line
    if node.kind == NodeKind.PACKAGE:
        path = f"{node.path}/__init__.py"
        start, end = 1, len(graph.file_lines(path))
    lines = graph.file_lines(path)
    start = max(1, start - context_lines)
    end = min(len(lines), end + context_lines)
    truncated = False
    full_end = end
    if max_lines is not None and end - start + 1 > max_lines:
        end = start + max_lines - 1
        truncated = True
    text = number_lines(lines[start - 1:end], start)
    if truncated:
        text += f"\n... ({full_end - end} more lines; read with a larger max_lines)"
    return ReadResult(node_id, path, start, end, text, truncated)


def node_or_error(graph: CodeGraph, node_id: str) -> Node:
    """The node, or UnknownNodeError naming up to three close ids (by the id's last name) the model can use."""
    node = graph.nodes.get(node_id)
    if node is not None:
        return node
    tail = node_id.split("::")[-1].split(":")[-1].split("/")[-1].split("@")[0]
    close = [hit.node.id for hit in find(graph, f"symbol:{tail}", limit=3)] if tail else []
    hint = f" Close ids: {', '.join(close)}." if close else ""
    raise UnknownNodeError(f"unknown node id {node_id!r} in the graph of {graph.repo}@{graph.commit or '?'}.{hint} "
                           "Use explore_find to list real node ids.")
