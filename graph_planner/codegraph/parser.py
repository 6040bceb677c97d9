"""Parse one Python file into definitions, imports and calls: tree-sitter first, `ast` only as a fallback.

Both engines produce the same `ParsedModule`, so the builder never knows which one ran. The tree-sitter path
runs one compiled query per file (the tree walk happens in C) and touches Python objects only for the nodes it
keeps, which is what keeps a full build close to the cost of a raw parse.
"""

from __future__ import annotations

import ast
import bisect
import re
import threading
from dataclasses import dataclass, field
from typing import Literal

from graph_planner.codegraph.schema import NodeKind

Engine = Literal["auto", "tree-sitter", "ast"]
# enum attribute access is slow on 3.11; these run per definition
_CLASS, _FUNCTION, _ATTRIBUTE = NodeKind.CLASS, NodeKind.FUNCTION, NodeKind.ATTRIBUTE

# callees are kept only when they are plain dotted names (ASCII identifiers, as most code is)
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", re.ASCII)
_SUPER_CALL = re.compile(r"super\(\)\.[A-Za-z_]\w*", re.ASCII)
_DOTTED_BYTES = re.compile(rb"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_SUPER_CALL_BYTES = re.compile(rb"super\(\)\.[A-Za-z_]\w*")
_COMMENT = re.compile(r"#[^\n]*")
_MAX_SIGNATURE = 240
_MAX_DOC = 160
_MAX_CACHED_CALLEES = 200_000


@dataclass(slots=True)
class Definition:
    """A class, function or attribute. `parent` indexes the enclosing class/function (-1: module level)."""

    kind: NodeKind
    name: str
    qualname: str
    start_line: int  # 1-based, first decorator line included
    end_line: int
    signature: str
    doc_head: str
    parent: int
    bases: tuple[str, ...] = ()


@dataclass(slots=True)
class ImportStmt:
    """One imported name. `name` is None for `import a.b` (then `bound` is the local name); '*' for star."""

    module: str  # dotted module as written, '' for `from . import x`
    level: int  # leading dots of a relative import
    name: str | None
    bound: str
    line: int


@dataclass
class ParsedModule:
    definitions: list[Definition] = field(default_factory=list)
    imports: list[ImportStmt] = field(default_factory=list)
    #: (index of the enclosing definition or -1, callee as a dotted name such as `self.save` or `os.path.join`)
    calls: list[tuple[int, str]] = field(default_factory=list)
    doc_head: str = ""
    engine: str = "tree-sitter"
    error: str | None = None


# --- shared helpers -------------------------------------------------------------------------------------------

def _clean_header(raw: str) -> str:
    """`def f(a,\\n b) -> X:  # c` -> `def f(a, b) -> X` (comments dropped, whitespace collapsed)."""
    text = " ".join((_COMMENT.sub("", raw) if "#" in raw else raw).split())
    if text.endswith(":"):
        text = text[:-1].rstrip()
    return text[:_MAX_SIGNATURE]


def _doc_head(raw: str) -> str:
    """First non-empty line of a docstring literal given as source text (prefix and quotes stripped)."""
    text = raw.lstrip("rRuUbB")
    for quote in ('"""', "'''", '"', "'"):
        if text.startswith(quote):
            text = text[len(quote):]
            text = text.removesuffix(quote)
            break
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:_MAX_DOC]
    return ""


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0].strip()[:_MAX_SIGNATURE]


def _callee_bytes(raw: bytes) -> str | None:
    if _DOTTED_BYTES.fullmatch(raw) or _SUPER_CALL_BYTES.fullmatch(raw):
        return raw.decode("ascii")
    return None



def _callee(text: str) -> str | None:
    if _DOTTED.fullmatch(text) or _SUPER_CALL.fullmatch(text):
        return text
    return None


@dataclass(slots=True)
class _RawDef:
    kind: NodeKind
    name: str
    start: int  # byte range of the def/class statement (decorators excluded): used for scoping
    end: int
    start_line: int
    end_line: int
    signature: str
    doc_head: str
    bases: tuple[str, ...] = ()


def _assemble(defs: list[_RawDef], attrs: list[tuple[int, _RawDef]], calls: list[tuple[int, str]],
              imports: list[ImportStmt], doc: str, engine: str) -> ParsedModule:
    """Give every definition its parent and qualname, and every attribute/call its enclosing scope.

    Scopes nest properly, so the innermost scope around a byte offset is the last scope starting before it or
    one of that scope's ancestors: one bisect plus a short walk up, no per-node tree traversal in Python.
    """
    defs.sort(key=lambda d: d.start)
    starts = [d.start for d in defs]
    parents: list[int] = []
    out: list[Definition] = []
    stack: list[int] = []
    for index, raw in enumerate(defs):
        while stack and defs[stack[-1]].end <= raw.start:
            stack.pop()
        parent = stack[-1] if stack else -1
        parents.append(parent)
        qualname = f"{out[parent].qualname}.{raw.name}" if parent >= 0 else raw.name
        out.append(Definition(raw.kind, raw.name, qualname, raw.start_line, raw.end_line, raw.signature,
                              raw.doc_head, parent, raw.bases))
        stack.append(index)

    def scope_of(offset: int) -> int:
        index = bisect.bisect_right(starts, offset) - 1
        while index >= 0 and defs[index].end <= offset:
            index = parents[index]
        return index

    for offset, raw in sorted(attrs, key=lambda item: (item[0], item[1].name)):
        parent = scope_of(offset)
        qualname = f"{out[parent].qualname}.{raw.name}" if parent >= 0 else raw.name
        out.append(Definition(_ATTRIBUTE, raw.name, qualname, raw.start_line, raw.end_line, raw.signature,
                              "", parent))
    scoped_calls = [(scope_of(offset), name) for offset, name in calls]
    imports.sort(key=lambda stmt: stmt.line)
    return ParsedModule(out, imports, scoped_calls, doc, engine)


# --- tree-sitter engine ---------------------------------------------------------------------------------------

# Only what can sit anywhere in a file is queried (each pattern adds to the C walk over every node); docstrings,
# decorators and attribute assignments sit at fixed places around a definition and are read from it directly.
_QUERY = """
[(class_definition) (function_definition)] @def
[(import_statement) (import_from_statement)] @import
(call function: [(identifier) (attribute)] @call)
"""


class _TreeSitterPython:
    """One Parser and one compiled Query, reused for every file (per thread: parsers are not thread-safe)."""

    def __init__(self) -> None:
        import tree_sitter
        import tree_sitter_python

        self._ts = tree_sitter
        language = tree_sitter.Language(tree_sitter_python.language())
        self.parser = tree_sitter.Parser(language)
        self.query = tree_sitter.Query(language, _QUERY)
        # callee texts repeat a lot (`len`, `self.save`): each is matched once, until the cache is full
        self.callees: dict[bytes, str | None] = {}

    def parse(self, source: bytes) -> ParsedModule:
        tree = self.parser.parse(source)
        root = tree.root_node
        captures = self._ts.QueryCursor(self.query).captures(root)

        def text(node) -> str:
            return source[node.start_byte:node.end_byte].decode("utf-8", "replace")

        attrs: list[tuple[int, _RawDef]] = []
        self._attributes(root, source, text, attrs)  # module level
        defs = [self._definition(node, source, text, attrs) for node in captures.get("def", [])]
        imports: list[ImportStmt] = []
        for node in captures.get("import", []):
            imports.extend(self._imports(node, text))
        calls: list[tuple[int, str]] = []
        callees = self.callees  # callee bytes -> name, or None when not a plain dotted name
        if len(callees) > _MAX_CACHED_CALLEES:
            callees.clear()
        for node in captures.get("call", []):
            start = node.start_byte
            raw = source[start:node.end_byte]
            try:
                name = callees[raw]
            except KeyError:
                name = callees[raw] = _callee_bytes(raw)
            if name is not None:
                calls.append((start, name))
        calls.sort()  # by offset; the name orders `super().f` and its `super` (same offset) deterministically
        return _assemble(defs, attrs, calls, imports, self._module_docstring(root, text), "tree-sitter")

    def _attributes(self, block, source: bytes, text, attrs: list[tuple[int, _RawDef]]) -> None:
        """Assignments directly in a module or class body (`x = 1`, `a, b = f()`, `x: int = 0`)."""
        for statement in block.children:
            if statement.type != "expression_statement":
                continue
            node = statement.named_child(0)
            if node is None or node.type != "assignment":
                continue
            start = statement.start_byte
            line_end = source.find(b"\n", start, statement.end_byte)  # statements can be huge dict literals
            signature = _first_line(source[start:line_end if line_end >= 0 else statement.end_byte]
                                    .decode("utf-8", "replace"))
            start_line, end_line = statement.start_point[0] + 1, statement.end_point[0] + 1
            for name in self._assigned_names(node, text):
                attrs.append((node.start_byte, _RawDef(_ATTRIBUTE, name, 0, 0, start_line, end_line, signature,
                                                       "")))

    @staticmethod
    def _literal_doc(literal, text) -> str:
        if literal is None:
            return ""
        raw = text(literal)
        if raw[:1] in "fF" or raw[:2].lower() in ("rf", "fr"):
            return ""  # an f-string is not a docstring
        return _doc_head(raw)

    def _module_docstring(self, root, text) -> str:
        for index in range(root.named_child_count):  # comments (a licence header) may come first
            first = root.named_child(index)
            if first.type != "comment":
                if first.type == "expression_statement" and first.named_child_count == 1 \
                        and first.named_child(0).type == "string":
                    return self._literal_doc(first.named_child(0), text)
                return ""
        return ""

    def _definition(self, node, source: bytes, text, attrs: list[tuple[int, _RawDef]]) -> _RawDef:
        body = node.child_by_field_name("body")
        name_node = node.child_by_field_name("name")
        start = node.start_byte
        parent = node.parent
        # decorators start a definition's line span
        first_row = (parent if parent is not None and parent.type == "decorated_definition" else node).start_point[0]
        header_end = body.start_byte if body is not None else node.end_byte
        signature = _clean_header(source[start:header_end].decode("utf-8", "replace"))
        if node.type == "class_definition":
            kind = _CLASS
            bases: list[str] = []
            superclasses = node.child_by_field_name("superclasses")
            if superclasses is not None:
                for child in superclasses.named_children:
                    if child.type in ("identifier", "attribute"):
                        base = text(child)
                        if _DOTTED.fullmatch(base):
                            bases.append(base)
            base_names = tuple(bases)
            if body is not None:
                self._attributes(body, source, text, attrs)
        else:
            kind = _FUNCTION
            base_names = ()
        doc = ""
        if body is not None:  # a docstring is the string starting the body block
            first = body.named_child(0)
            if first is not None and first.type == "expression_statement":
                literal = first.named_child(0)
                if literal is not None and literal.type == "string" and literal.start_byte == body.start_byte:
                    doc = self._literal_doc(literal, text)
        return _RawDef(kind, text(name_node) if name_node is not None else "?", start, node.end_byte,
                       first_row + 1, node.end_point[0] + 1, signature, doc, base_names)

    @staticmethod
    def _assigned_names(assignment, text) -> list[str]:
        names: list[str] = []
        node = assignment
        while node is not None and node.type == "assignment":
            left = node.child_by_field_name("left")
            if left is not None:
                if left.type == "identifier":
                    names.append(text(left))
                elif left.type in ("pattern_list", "tuple_pattern", "list_pattern"):
                    names.extend(text(c) for c in left.named_children if c.type == "identifier")
            node = node.child_by_field_name("right")
        return names

    @staticmethod
    def _imports(node, text) -> list[ImportStmt]:
        line = node.start_point[0] + 1
        out: list[ImportStmt] = []

        def dotted(n) -> str:
            return "".join(text(n).split())

        if node.type == "import_statement":
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    module = dotted(child.child_by_field_name("name"))
                    out.append(ImportStmt(module, 0, None, text(child.child_by_field_name("alias")), line))
                else:
                    module = dotted(child)
                    out.append(ImportStmt(module, 0, None, module.split(".")[0], line))
            return out
        module_node = node.child_by_field_name("module_name")
        module, level = "", 0
        if module_node is not None:
            if module_node.type == "relative_import":
                for child in module_node.named_children:
                    if child.type == "import_prefix":
                        level = text(child).count(".")
                    elif child.type == "dotted_name":
                        module = dotted(child)
            else:
                module = dotted(module_node)
        if module == "__future__":
            return out
        for child in node.named_children:
            if child.type == "wildcard_import":
                out.append(ImportStmt(module, level, "*", "*", line))
        for child in node.children_by_field_name("name"):
            if child.type == "aliased_import":
                name = dotted(child.child_by_field_name("name"))
                out.append(ImportStmt(module, level, name, text(child.child_by_field_name("alias")), line))
            else:
                name = dotted(child)
                out.append(ImportStmt(module, level, name, name, line))
        return out


# --- ast engine (fallback) --------------------------------------------------------------------------------------

def _ast_dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
            and not node.args and not node.keywords and len(parts) == 1):
        return f"super().{parts[0]}"
    return None


def _parse_with_ast(source: bytes) -> ParsedModule:
    tree = ast.parse(source)
    line_starts = [0]
    for index, byte in enumerate(source):
        if byte == 10:
            line_starts.append(index + 1)

    def offset(line: int, col: int) -> int:
        return line_starts[line - 1] + col

    def segment(start: int, end: int) -> str:
        return source[start:end].decode("utf-8", "replace")

    def docstring(body: list[ast.stmt]) -> str:
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            expr = body[0].value
            return _doc_head(segment(offset(expr.lineno, expr.col_offset),
                                     offset(expr.end_lineno or expr.lineno, expr.end_col_offset or 0)))
        return ""

    defs: list[_RawDef] = []
    attrs: list[tuple[int, _RawDef]] = []
    calls: list[tuple[int, str]] = []
    imports: list[ImportStmt] = []

    def add_attributes(body: list[ast.stmt]) -> None:
        for stmt in body:
            targets: list[ast.expr]
            if isinstance(stmt, ast.Assign):
                targets = list(stmt.targets)
            elif isinstance(stmt, ast.AnnAssign):
                targets = [stmt.target]
            else:
                continue
            start = offset(stmt.lineno, stmt.col_offset)
            signature = _first_line(segment(start, offset(stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)))
            for target in targets:
                elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                for element in elements:
                    if isinstance(element, ast.Name):
                        attrs.append((start, _RawDef(_ATTRIBUTE, element.id, 0, 0, stmt.lineno,
                                                     stmt.end_lineno or stmt.lineno, signature, "")))

    add_attributes(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = offset(node.lineno, node.col_offset)
            end = offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
            first = node.body[0]
            first_start = min([(first.lineno, first.col_offset)]
                              + [(d.lineno, d.col_offset - 1) for d in getattr(first, "decorator_list", [])])
            signature = _clean_header(segment(start, offset(*first_start)))
            first_line = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if isinstance(node, ast.ClassDef):
                bases = tuple(b for b in (_ast_dotted(base) for base in node.bases)
                              if b is not None and not b.startswith("super()"))
                defs.append(_RawDef(_CLASS, node.name, start, end, first_line, node.end_lineno or node.lineno,
                                    signature, docstring(node.body), bases))
                add_attributes(node.body)
            else:
                defs.append(_RawDef(_FUNCTION, node.name, start, end, first_line,
                                    node.end_lineno or node.lineno, signature, docstring(node.body)))
        elif isinstance(node, ast.Call):
            callee = _ast_dotted(node.func)
            if callee is not None and _callee(callee):
                calls.append((offset(node.lineno, node.col_offset), callee))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imports.append(ImportStmt(alias.name, 0, None, alias.asname or alias.name.split(".")[0],
                                          node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                imports.append(ImportStmt(node.module or "", node.level, alias.name, alias.asname or alias.name,
                                          node.lineno))
    calls.sort(key=lambda item: item[0])
    return _assemble(defs, attrs, calls, imports, docstring(tree.body), "ast")


# --- entry point ----------------------------------------------------------------------------------------------

_local = threading.local()


def tree_sitter_available() -> bool:
    try:
        _tree_sitter()
    except Exception:  # noqa: BLE001 - any import/ABI problem means "use ast"
        return False
    return True


def _tree_sitter() -> _TreeSitterPython:
    engine = getattr(_local, "engine", None)
    if engine is None:
        engine = _local.engine = _TreeSitterPython()
    return engine


def parse_python(source: bytes | str, engine: Engine = "auto") -> ParsedModule:
    """Parse one file. `auto` = tree-sitter, falling back to `ast` only when tree-sitter is missing or raises.

    A file neither engine can read yields an empty module with `error` set (its FILE node still exists).
    """
    data = source.encode("utf-8") if isinstance(source, str) else source
    ts_error = None
    if engine != "ast":
        try:
            return _tree_sitter().parse(data)
        except Exception as exc:
            if engine == "tree-sitter":
                raise
            ts_error = f"tree-sitter failed ({type(exc).__name__}: {exc}); used ast"
    try:
        parsed = _parse_with_ast(data)
    except (SyntaxError, ValueError) as exc:
        return ParsedModule(engine="ast", error=f"ast could not parse the file: {exc}")
    parsed.error = ts_error
    return parsed
