"""Procedural bug injection (SWE-smith's modifier kinds) on the standard library's ``ast``, applied by splicing the
source text, so every byte outside the edited span (comments, blank lines, quoting, layout) stays as written.

Why not ``swesmith``: importing its modifiers pulls in every language's tree-sitter grammar (seconds and hundreds
of MB for a Python-only job); libcst is not a dependency. ``ast`` node positions (line + UTF-8 byte column) are
exact enough to splice, and the result is re-parsed so no candidate is a syntax error.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

MODIFIERS = (
    "operator_flip", "swap_operands", "change_constant", "invert_conditional", "remove_conditional",
    "remove_assignment", "remove_loop", "shuffle_lines", "remove_base_class",
)

_BIN_FLIP: dict[type[ast.operator], tuple[str, str]] = {
    ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"), ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "/"), ast.Mod: ("%", "//"), ast.LShift: ("<<", ">>"), ast.RShift: (">>", "<<"),
    ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"),
}
_CMP_FLIP: dict[type[ast.cmpop], tuple[str, str]] = {
    ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
}
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)


@dataclass(frozen=True)
class Mutation:
    """One candidate bug: replace bytes [start, end) of ``path`` with ``replacement``."""

    path: str
    modifier: str
    target: str  # code-graph node id of the function / class mutated
    line: int
    start: int
    end: int
    replacement: bytes
    mutated: bytes  # the whole file after the edit

    @property
    def key(self) -> str:
        """Identity of the result (same file bytes = same bug, whichever modifier made it)."""
        return hashlib.sha1(self.path.encode() + b"\0" + self.mutated).hexdigest()


class _Source:
    """The file's bytes with ast positions turned into byte offsets."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.starts = [0]
        for i, byte in enumerate(data):
            if byte == 10:
                self.starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def text(self, node: ast.AST) -> bytes:
        start, end = self.span(node)
        return self.data[start:end]

    def whole_lines(self, node: ast.stmt) -> tuple[int, int] | None:
        """Byte range of the full lines holding ``node`` when nothing else shares them (no `a; b`), else None."""
        start, end = self.span(node)
        line_start = self.starts[node.lineno - 1]
        assert node.end_lineno is not None
        line_end = self.starts[node.end_lineno] if node.end_lineno < len(self.starts) else len(self.data)
        if self.data[line_start:start].strip() or self.data[end:line_end].strip().split(b"#")[0].strip():
            return None
        return line_start, line_end


def _body_blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for handler in getattr(node, "handlers", []) or []:
        yield handler.body


def _walk_own(node: ast.AST) -> Iterator[ast.AST]:
    """Every node inside ``node`` except nested function / class bodies (those are targets of their own)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield child
        yield from _walk_own(child)


def _operator_gap(src: _Source, left: ast.AST, right: ast.AST, symbol: str) -> tuple[int, int] | None:
    """Byte range of ``symbol`` between the two operands (parentheses and spaces around it allowed)."""
    gap_start, gap_end = src.span(left)[1], src.span(right)[0]
    gap = src.data[gap_start:gap_end]
    if b"#" in gap or b"\\" in gap:
        return None
    index = gap.find(symbol.encode())
    if index < 0 or gap.count(symbol.encode()) != 1 or gap.replace(symbol.encode(), b"").strip(b" ()\n\t"):
        return None
    return gap_start + index, gap_start + index + len(symbol)


def _edits_in_function(src: _Source, fn: ast.AST) -> Iterator[tuple[str, int, int, int, bytes]]:
    """(modifier, line, start, end, replacement) for every edit the modifiers can make inside ``fn``."""
    for node in _walk_own(fn):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN_FLIP:
            old, new = _BIN_FLIP[type(node.op)]
            gap = _operator_gap(src, node.left, node.right, old)
            if gap:
                yield "operator_flip", line, gap[0], gap[1], new.encode()
            if isinstance(node.op, _NON_COMMUTATIVE):
                yield from _swap(src, node.left, node.right, line)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP_FLIP:
            old, new = _CMP_FLIP[type(node.ops[0])]
            gap = _operator_gap(src, node.left, node.comparators[0], old)
            if gap:
                yield "operator_flip", line, gap[0], gap[1], new.encode()
                if not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
                    yield from _swap(src, node.left, node.comparators[0], line)
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            gap = _operator_gap(src, node.values[0], node.values[1], old)
            if gap:
                yield "operator_flip", line, gap[0], gap[1], new.encode()
        elif isinstance(node, ast.Constant) and type(node.value) in (int, bool):
            start, end = src.span(node)
            if src.data[start:end] != repr(node.value).encode():
                continue  # 0x10, 1_000: leave the spelling alone
            if isinstance(node.value, bool):
                yield "change_constant", line, start, end, repr(not node.value).encode()
            else:
                yield "change_constant", line, start, end, str(node.value + 1).encode()
                if node.value > 0:
                    yield "change_constant", line, start, end, str(node.value - 1).encode()
        if isinstance(node, (ast.If, ast.While)) or (isinstance(node, ast.IfExp)):
            start, end = src.span(node.test)
            text = src.data[start:end]
            if b"\n" not in text:
                yield "invert_conditional", line, start, end, b"not (" + text + b")"
    for block in [b for n in [fn, *_walk_own(fn)] for b in _body_blocks(n)]:
        yield from _block_edits(src, block)


def _swap(src: _Source, left: ast.AST, right: ast.AST, line: int) -> Iterator[tuple[str, int, int, int, bytes]]:
    (ls, le), (rs, re_) = src.span(left), src.span(right)
    if b"\n" in src.data[ls:re_] or src.data[ls:le] == src.data[rs:re_] or set(src.data[le:rs]) & set(b"()#"):
        return  # a parenthesised operand's span excludes its parentheses: swapping would regroup, not swap
    yield "swap_operands", line, ls, re_, src.data[rs:re_] + src.data[le:rs] + src.data[ls:le]


def _block_edits(src: _Source, block: list[ast.stmt]) -> Iterator[tuple[str, int, int, int, bytes]]:
    removable = len(block) > 1  # never leave a block empty
    for i, stmt in enumerate(block):
        lines = src.whole_lines(stmt)
        if lines is None:
            continue
        if removable and not (i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            kind = {ast.If: "remove_conditional", ast.Assign: "remove_assignment", ast.AugAssign: "remove_assignment",
                    ast.AnnAssign: "remove_assignment", ast.For: "remove_loop", ast.While: "remove_loop"}.get(type(stmt))
            if kind and not (isinstance(stmt, ast.AnnAssign) and stmt.value is None):
                yield kind, stmt.lineno, lines[0], lines[1], b""
        if i + 1 < len(block):
            nxt = block[i + 1]
            nxt_lines = src.whole_lines(nxt)
            if (nxt_lines and stmt.lineno == stmt.end_lineno and nxt.lineno == nxt.end_lineno
                    and lines[1] == nxt_lines[0] and not isinstance(stmt, (ast.Return, ast.Raise))):
                first, second = src.data[lines[0]:lines[1]], src.data[nxt_lines[0]:nxt_lines[1]]
                if first.strip() != second.strip() and first.endswith(b"\n") and second.endswith(b"\n"):
                    yield "shuffle_lines", stmt.lineno, lines[0], nxt_lines[1], second + first


def _class_edits(src: _Source, cls: ast.ClassDef) -> Iterator[tuple[str, int, int, int, bytes]]:
    """remove_base_class: drop one base from the class header (the parentheses too when it was the only one)."""
    bases = [b for b in cls.bases]
    if not bases or cls.keywords:
        return
    header_start = src.offset(cls.lineno, cls.col_offset)
    first_start = src.span(bases[0])[0]
    last_end = src.span(bases[-1])[1]
    open_paren = src.data.rfind(b"(", header_start, first_start)
    close_paren = src.data.find(b")", last_end)
    if open_paren < 0 or close_paren < 0 or src.data[last_end:close_paren].strip(b" ,\n"):
        return
    if len(bases) == 1:
        yield "remove_base_class", cls.lineno, open_paren, close_paren + 1, b""
        return
    for i, base in enumerate(bases):
        start, end = src.span(base)
        if i + 1 < len(bases):
            end = src.span(bases[i + 1])[0]
        else:
            start = src.span(bases[i - 1])[1]
        yield "remove_base_class", cls.lineno, start, end, b""


def _find_def(tree: ast.Module, kind: str, qualname: str) -> ast.AST | None:
    """The FunctionDef / ClassDef of a code-graph qualname (``Class.method``, ``func``)."""
    parts = qualname.split(".")
    scope: list[ast.stmt] = tree.body
    found: ast.AST | None = None
    for depth, name in enumerate(parts):
        found = None
        for node in scope:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                found = node
        if found is None:
            return None
        scope = getattr(found, "body", [])
    wanted = ast.ClassDef if kind == "class" else (ast.FunctionDef, ast.AsyncFunctionDef)
    return found if isinstance(found, wanted) else None


def mutations_for(data: bytes, path: str, target: str, kind: str, qualname: str) -> list[Mutation]:
    """Every valid, distinct mutation of one function (``kind='function'``) or class header (``'class'``) of the
    file ``data``; ordered by position, so the list is the same on every run. Edits that do not re-parse, or that
    leave the file unchanged, are dropped."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return []
    node = _find_def(tree, kind, qualname)
    if node is None:
        return []
    src = _Source(data)
    edits = _class_edits(src, node) if isinstance(node, ast.ClassDef) else _edits_in_function(src, node)
    seen: set[bytes] = set()
    out: list[Mutation] = []
    for modifier, line, start, end, replacement in sorted(set(edits), key=lambda e: (e[2], e[3], e[0], e[4])):
        mutated = data[:start] + replacement + data[end:]
        if mutated == data or mutated in seen:
            continue
        try:
            ast.parse(mutated)
        except (SyntaxError, ValueError):
            continue
        seen.add(mutated)
        out.append(Mutation(path, modifier, target, line, start, end, replacement, mutated))
    return out
