"""Parse one Python file into definitions, imports and calls: tree-sitter first, `ast` only as a fallback.

Both engines produce the same `ParsedModule`, so the builder never knows which one ran. The tree-sitter path
never walks the whole tree: it finds candidates in the source bytes and confirms each on the tree, touching
Python objects only for the nodes it keeps, which is what keeps a full build close to the cost of a raw parse.
"""

from __future__ import annotations

import ast
import bisect
import keyword
import re
import threading
from collections.abc import Callable
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
    # byte range of the def/class statement (decorators excluded): only for scoping while parsing
    start: int = field(default=0, compare=False, repr=False)
    end: int = field(default=0, compare=False, repr=False)


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
    #: distinct (index of the enclosing definition or -1, callee as a dotted name such as `self.save` or
    #: `os.path.join`), in order of first appearance
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


def _callee(text: str) -> str | None:
    if _DOTTED.fullmatch(text) or _SUPER_CALL.fullmatch(text):
        return text
    return None


def _nest(defs: list[Definition]) -> Callable[[int], int]:
    """Sort the definitions by position and give each (in place) its parent and qualname; return `scope_of`,
    the index of the innermost definition around a byte offset (-1: module level).

    Scopes nest properly, so the innermost scope around an offset is the last scope starting before it or one
    of that scope's ancestors: one bisect plus a short walk up, no per-node tree traversal in Python.
    """
    defs.sort(key=lambda d: d.start)
    starts = [d.start for d in defs]
    parents: list[int] = []
    stack: list[int] = []
    for index, definition in enumerate(defs):
        while stack and defs[stack[-1]].end <= definition.start:
            stack.pop()
        parent = stack[-1] if stack else -1
        parents.append(parent)
        definition.parent = parent
        definition.qualname = f"{defs[parent].qualname}.{definition.name}" if parent >= 0 else definition.name
        stack.append(index)

    def scope_of(offset: int) -> int:
        index = bisect.bisect_right(starts, offset) - 1
        while index >= 0 and defs[index].end <= offset:
            index = parents[index]
        return index

    return scope_of


def _assemble(defs: list[Definition], scope_of: Callable[[int], int], attrs: list[tuple[int, Definition]],
              calls: list[tuple[int, str]], imports: list[ImportStmt], doc: str, engine: str) -> ParsedModule:
    """Give every attribute its enclosing scope and qualname; `defs` went through `_nest`, `calls` are the
    distinct (scope, callee) pairs in order of first appearance."""
    out = list(defs)
    for offset, attribute in sorted(attrs, key=lambda item: (item[0], item[1].name)):
        parent = scope_of(offset)
        attribute.parent = parent
        attribute.qualname = f"{defs[parent].qualname}.{attribute.name}" if parent >= 0 else attribute.name
        out.append(attribute)
    imports.sort(key=lambda stmt: stmt.line)
    return ParsedModule(out, imports, calls, doc, engine)


# --- tree-sitter engine ---------------------------------------------------------------------------------------
# Definitions, imports and calls can sit anywhere in a file, but walking every node of the tree (even in C, with a
# query) costs a third of the parse itself. Their keywords and call parentheses can be found in the source bytes
# instead, with literal-prefix regexes (C string search), and each candidate is confirmed on the tree with one
# `descendant_for_byte_range` lookup: words inside strings and comments, `def f(` or `if (` are rejected by node
# kind, so the result is exactly what a full walk would find.

_DEF_KEYWORDS = (re.compile(rb"def[ \t]+([A-Za-z_]\w*)"), re.compile(rb"class[ \t]+([A-Za-z_]\w*)"))
_IMPORT_KEYWORD = re.compile(rb"import(?![\w.])")
# on the reversed source: `(`, optional whitespace, then the callee's run of name characters and dots (reversed),
# unless `def`/`class` precede it. The whitespace may hold a line continuation (`re.compile \\` + newline + `(`).
_CALL_PAREN_REVERSED = re.compile(rb"\([\s\\]*+([\w.]++)(?![ \t]+(?:fed|ssalc)(?!\w))")
_KEYWORDS = frozenset(keyword.kwlist)  # `if (`, `return (`...: never a callee
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


_QUOTES = frozenset(b"\"'")
_STRING_PREFIXES = frozenset(b"rRbBuUfF")


def _may_start_string(source: bytes, offset: int) -> bool:
    """Whether a string literal (with up to two prefix letters) can start at `offset`: a byte test that spares
    the tree lookups for the many definitions without a docstring."""
    for index in range(offset, min(offset + 3, len(source))):
        byte = source[index]
        if byte in _QUOTES:
            return True
        if byte not in _STRING_PREFIXES:
            return False
    return False


def _callee_from_reversed(run: bytes) -> str | None:
    """The callee of a reversed run: a plain dotted name, `super().name` (run `.name`; its `super()` is checked
    by the caller), or None (a method of a call result, a subscript, a string: not kept)."""
    callee = run[::-1]
    if _DOTTED_BYTES.fullmatch(callee):
        name = callee.decode("ascii")
        return None if name in _KEYWORDS else name
    if callee[:1] == b"." and _DOTTED_BYTES.fullmatch(callee, 1) and b"." not in callee[1:]:
        return "super()" + callee.decode("ascii")
    return None


class _TreeSitterPython:
    """One Parser reused for every file (per thread: parsers are not thread-safe)."""

    def __init__(self) -> None:
        import tree_sitter
        import tree_sitter_python

        language = tree_sitter.Language(tree_sitter_python.language())
        self.parser = tree_sitter.Parser(language)
        kind = language.id_for_node_kind
        self._call_kind = kind("call", True)
        self._def_kinds = frozenset({kind("function_definition", True), kind("class_definition", True)})
        self._import_kinds = frozenset({kind("import_statement", True), kind("import_from_statement", True)})
        self._import_keyword = kind("import", False)
        # node kinds compared per statement: ints, as `node.type` builds a new str on every access
        self._class_kind = kind("class_definition", True)
        self._decorated_kind = kind("decorated_definition", True)
        self._expression_statement = kind("expression_statement", True)
        self._assignment = kind("assignment", True)
        self._string = kind("string", True)
        self._identifier = kind("identifier", True)
        self._name_kinds = frozenset({self._identifier, kind("attribute", True)})
        self._pattern_kinds = frozenset({kind("pattern_list", True), kind("tuple_pattern", True),
                                         kind("list_pattern", True)})
        # callee runs repeat a lot (`len`, `self.save`): each is checked once, until the cache is full
        self.callees: dict[bytes, str | None] = {}

    def parse(self, source: bytes) -> ParsedModule:
        root = self.parser.parse(source).root_node
        node_at = root.descendant_for_byte_range

        def text(node) -> str:
            return source[node.start_byte:node.end_byte].decode("utf-8", "replace")

        attrs: list[tuple[int, Definition]] = []
        self._attributes(root, source, text, attrs)  # module level
        found: list[tuple[int, object, str | None]] = []
        size = len(source)
        for pattern in _DEF_KEYWORDS:  # the smallest node spanning `def name` is the definition itself
            for match in pattern.finditer(source):
                start, end = match.span()
                if start and source[start - 1] in _WORD_BYTES:
                    continue
                node = node_at(start, end)
                if node.kind_id in self._def_kinds:  # the name, unless it goes on in non-ASCII letters
                    name = match.group(1).decode("ascii") if end == size or source[end] < 0x80 else None
                    found.append((node.start_byte, node, name))
        found.sort(key=lambda item: item[0])
        defs: list[Definition] = []
        previous = 0
        for start, node, name in found:
            # decorators sit between the previous definition and this one: without an `@` there, no parent lookup
            maybe_decorated = source.find(b"@", previous, start) >= 0
            defs.append(self._definition(node, source, text, attrs, name, maybe_decorated))
            previous = start
        imports: list[ImportStmt] = []
        for match in _IMPORT_KEYWORD.finditer(source):  # the `import` keyword token, child of its statement
            start = match.start()
            if start and source[start - 1] in _WORD_BYTES:
                continue
            node = node_at(start, match.end())
            if node.kind_id == self._import_keyword:
                statement = node.parent
                if statement is not None and statement.kind_id in self._import_kinds:
                    imports.extend(self._imports(statement, text))
        scope_of = _nest(defs)
        return _assemble(defs, scope_of, attrs, self._calls(source, node_at, scope_of), imports,
                         self._module_docstring(root, text), "tree-sitter")

    def _calls(self, source: bytes, node_at, scope_of: Callable[[int], int]) -> list[tuple[int, str]]:
        """Distinct (scope, callee) of the calls whose callee is a plain dotted name, in order of appearance.

        A candidate whose (scope, callee) is already known needs no lookup on the tree (a third of all calls:
        `self.assertEqual` over and over)."""
        callees = self.callees
        if len(callees) > _MAX_CACHED_CALLEES:
            callees.clear()
        call_kind = self._call_kind
        size = len(source)
        seen: set[tuple[int, str]] = set()
        calls: list[tuple[int, str]] = []
        # matched from the end of the file backwards: reversed, they come in source order (a callee ends right
        # before its own `(`, so ordering by `(` orders by callee; `super` comes before its `super().f`)
        matches = [(match.start(), match.end(1), match.group(1))
                   for match in _CALL_PAREN_REVERSED.finditer(source[::-1])]
        for paren_end, run_end, run in reversed(matches):
            try:
                name = callees[run]
            except KeyError:
                name = callees[run] = _callee_from_reversed(run)
            if name is None:
                continue
            start = size - run_end
            if name[0] == "s" and name.startswith("super()."):
                if source[start - 7:start] != b"super()":
                    continue
                start -= 7
            key = (scope_of(start), name)
            if key in seen:
                continue
            # the smallest node spanning the callee and its `(` is a call starting at the callee, or no call
            node = node_at(start, size - paren_end)
            if node.kind_id == call_kind and node.start_byte == start:
                seen.add(key)
                calls.append(key)
        return calls

    def _attributes(self, block, source: bytes, text, attrs: list[tuple[int, Definition]]) -> None:
        """Assignments directly in a module or class body (`x = 1`, `a, b = f()`, `x: int = 0`)."""
        expression_statement, assignment = self._expression_statement, self._assignment
        for statement in block.children:
            if statement.kind_id != expression_statement:
                continue
            node = statement.named_child(0)
            if node is None or node.kind_id != assignment:
                continue
            start = statement.start_byte
            line_end = source.find(b"\n", start, statement.end_byte)  # statements can be huge dict literals
            signature = _first_line(source[start:line_end if line_end >= 0 else statement.end_byte]
                                    .decode("utf-8", "replace"))
            start_line, end_line = statement.start_point[0] + 1, statement.end_point[0] + 1
            for name in self._assigned_names(node, text):
                attrs.append((node.start_byte, Definition(_ATTRIBUTE, name, "", start_line, end_line,
                                                           signature, "", -1)))

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

    def _definition(self, node, source: bytes, text, attrs: list[tuple[int, Definition]], name: str | None,
                    maybe_decorated: bool) -> Definition:
        body = node.child_by_field_name("body")
        start = node.start_byte
        parent = node.parent if maybe_decorated else None
        # decorators start a definition's line span
        first_row = (parent if parent is not None and parent.kind_id == self._decorated_kind
                     else node).start_point[0]
        body_start = body.start_byte if body is not None else -1
        header_end = body_start if body is not None else node.end_byte
        signature = _clean_header(source[start:header_end].decode("utf-8", "replace"))
        if node.kind_id == self._class_kind:
            kind = _CLASS
            bases: list[str] = []
            superclasses = node.child_by_field_name("superclasses")
            if superclasses is not None:
                for child in superclasses.named_children:
                    if child.kind_id in self._name_kinds:
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
        lead = source[body_start] if 0 <= body_start < len(source) else 0  # a docstring starts the body
        if lead in _QUOTES or (lead in _STRING_PREFIXES and _may_start_string(source, body_start)):
            first = body.named_child(0) if body.named_child_count else None  # type: ignore[union-attr]
            if first is not None and first.kind_id == self._expression_statement:
                literal = first.named_child(0)
                if literal is not None and literal.kind_id == self._string and literal.start_byte == body_start:
                    doc = self._literal_doc(literal, text)
        if name is None:
            name_node = node.child_by_field_name("name")
            name = text(name_node) if name_node is not None else "?"
        return Definition(kind, name, "", first_row + 1,
                          node.end_point[0] + 1, signature, doc, -1, base_names, start, node.end_byte)

    def _assigned_names(self, assignment, text) -> list[str]:
        names: list[str] = []
        node = assignment
        identifier = self._identifier
        while node is not None and node.kind_id == self._assignment:
            left = node.child_by_field_name("left")
            if left is not None:
                if left.kind_id == identifier:
                    names.append(text(left))
                elif left.kind_id in self._pattern_kinds:
                    names.extend(text(c) for c in left.named_children if c.kind_id == identifier)
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

    defs: list[Definition] = []
    attrs: list[tuple[int, Definition]] = []
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
                        attrs.append((start, Definition(_ATTRIBUTE, element.id, "", stmt.lineno,
                                                        stmt.end_lineno or stmt.lineno, signature, "", -1)))

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
                defs.append(Definition(_CLASS, node.name, "", first_line, node.end_lineno or node.lineno,
                                       signature, docstring(node.body), -1, bases, start, end))
                add_attributes(node.body)
            else:
                defs.append(Definition(_FUNCTION, node.name, "", first_line, node.end_lineno or node.lineno,
                                       signature, docstring(node.body), -1, (), start, end))
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
    scope_of = _nest(defs)
    scoped_calls = list(dict.fromkeys((scope_of(offset), name) for offset, name in calls))
    return _assemble(defs, scope_of, attrs, scoped_calls, imports, docstring(tree.body), "ast")


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
