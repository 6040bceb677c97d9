"""Graph build: node kinds, spans, qualnames, resolved/unresolved edges, ast fallback, incremental update."""

from __future__ import annotations

import json

import pytest
from test_codegraph_fixtures import BASE, SHAPES, UTIL, line_of, package_files

from graph_planner.codegraph import parser as parser_module
from graph_planner.codegraph.builder import apply_changes, build_graph
from graph_planner.codegraph.graph import CodeGraph
from graph_planner.codegraph.parser import parse_python
from graph_planner.codegraph.schema import REPO_ID, Edge, EdgeKind, NodeKind


@pytest.fixture(scope="module")
def graph() -> CodeGraph:
    return build_graph(package_files(), "acme/shapes", "c0ffee")


def edge_set(graph: CodeGraph, kind: EdgeKind) -> set[tuple[str, str, bool]]:
    return {(e.src, e.dst, e.resolved) for e in graph.edges() if e.kind == kind}


def test_every_cgm_node_kind_is_built_from_the_files(graph):
    kinds = {node.kind for node in graph.nodes.values()}
    assert kinds == set(NodeKind)
    assert graph.nodes["pkg:pkg"].kind == NodeKind.PACKAGE and graph.nodes["pkg:pkg/sub"].kind == NodeKind.PACKAGE
    assert graph.nodes["file:README.md"].kind == NodeKind.TEXTFILE
    assert graph.nodes["file:setup.cfg"].kind == NodeKind.TEXTFILE
    assert "file:data/blob.bin" not in graph.nodes  # neither source nor docs
    assert graph.nodes["attr:pkg/base.py::DEFAULT_NAME"].kind == NodeKind.ATTRIBUTE
    assert graph.nodes["attr:pkg/base.py::Shape.sides"].signature == "sides: int = 0"


def test_spans_qualnames_signatures_and_docstrings(graph):
    square = graph.nodes["cls:pkg/shapes.py::Square"]
    assert (square.start_line, square.end_line) == (line_of(SHAPES, "class Square"), line_of(SHAPES, "util.fmt"))
    assert square.signature == "class Square(BaseShape)" and square.doc_head == "A square."
    nested = graph.nodes["fn:pkg/shapes.py::Square.area.squared"]
    assert nested.qualname == "Square.area.squared" and nested.name == "squared"
    assert nested.start_line == line_of(SHAPES, "def squared") and nested.end_line == line_of(SHAPES, "x * x")
    assert graph.nodes["file:pkg/base.py"].doc_head == "Base shapes."
    assert graph.nodes["file:pkg/shapes.py"].qualname == "pkg.shapes"
    assert graph.nodes["fn:pkg/base.py::Shape.__init__"].signature == "def __init__(self, name=DEFAULT_NAME)"


def test_contains_edges_form_the_hierarchy_repo_to_nested_function(graph):
    chain = ["fn:pkg/shapes.py::Square.area.squared"]
    while chain[-1] != REPO_ID:
        parent = graph.parent(chain[-1])
        assert parent is not None, f"{chain[-1]} has no parent"
        chain.append(parent)
    assert chain == ["fn:pkg/shapes.py::Square.area.squared", "fn:pkg/shapes.py::Square.area",
                     "cls:pkg/shapes.py::Square", "file:pkg/shapes.py", "pkg:pkg", REPO_ID]
    assert graph.parent("pkg:pkg/sub") == "pkg:pkg"
    assert graph.parent("file:tests/test_shapes.py") == REPO_ID  # tests/ has no __init__.py


def test_imports_resolve_absolute_and_relative_and_keep_external_names(graph):
    imports = edge_set(graph, EdgeKind.IMPORTS)
    assert ("file:pkg/shapes.py", "file:pkg/base.py", True) in imports
    assert ("file:pkg/shapes.py", "file:pkg/util.py", True) in imports  # `from . import util` and pkg.util
    assert ("file:pkg/sub/deep.py", "file:pkg/shapes.py", True) in imports  # `from ..shapes import`
    assert ("file:pkg/shapes.py", "os.path", False) in imports
    assert ("file:pkg/sub/deep.py", "...nowhere", False) in imports  # beyond the top package
    assert ("file:tests/test_shapes.py", "file:pkg/shapes.py", True) in imports


def test_extends_resolves_through_import_aliases_and_relative_imports(graph):
    extends = edge_set(graph, EdgeKind.EXTENDS)
    assert ("cls:pkg/shapes.py::Square", "cls:pkg/base.py::Shape", True) in extends
    assert ("cls:pkg/sub/deep.py::Cube", "cls:pkg/shapes.py::Square", True) in extends


def test_calls_resolve_imports_self_super_nested_and_constructors(graph):
    calls = edge_set(graph, EdgeKind.CALLS)
    expected = {
        ("fn:pkg/shapes.py::Square.__init__", "fn:pkg/util.py::clamp"),  # from pkg.util import clamp
        ("fn:pkg/shapes.py::Square.__init__", "fn:pkg/base.py::Shape.__init__"),  # super().__init__
        ("fn:pkg/shapes.py::Square.describe", "fn:pkg/base.py::Shape.label"),  # self.label, inherited
        ("fn:pkg/shapes.py::Square.describe", "fn:pkg/util.py::fmt"),  # util.fmt via `from . import util`
        ("fn:pkg/shapes.py::Square.describe", "fn:pkg/shapes.py::Square.area"),
        ("fn:pkg/shapes.py::Square.area", "fn:pkg/shapes.py::Square.area.squared"),  # nested function
        ("fn:pkg/base.py::Shape.describe", "fn:pkg/base.py::Shape.label"),
        ("fn:pkg/sub/deep.py::make", "cls:pkg/sub/deep.py::Cube"),  # constructor call
        ("fn:tests/test_shapes.py::test_area", "cls:pkg/shapes.py::Square"),
    }
    assert expected <= {(src, dst) for src, dst, resolved in calls if resolved}


def test_unresolved_calls_are_kept_as_written_names(graph):
    unresolved = {(src, dst) for src, dst, resolved in edge_set(graph, EdgeKind.CALLS) if not resolved}
    assert ("fn:pkg/shapes.py::missing", "undefined_helper") in unresolved
    assert ("fn:pkg/shapes.py::missing", "os.path.join") in unresolved
    assert ("fn:pkg/shapes.py::area_of", "shape.area") in unresolved
    assert not any(dst == "len" for _, dst in unresolved)  # builtins carry no information


def test_redefined_names_get_distinct_ids_by_line():
    source = "if X:\n    def f():\n        pass\nelse:\n    def f():\n        return 1\n"
    graph = build_graph({"m.py": source}, "r", "c")
    assert {"fn:m.py::f", "fn:m.py::f@5"} <= set(graph.nodes)


def test_ast_fallback_builds_the_same_graph_as_tree_sitter():
    files = package_files()
    with_ts = build_graph(files, "acme/shapes", "c0ffee", engine="tree-sitter").to_json()
    with_ast = build_graph(files, "acme/shapes", "c0ffee", engine="ast").to_json()
    for key in ("nodes", "edges", "imports", "class_bases"):
        assert with_ast[key] == with_ts[key], key


def test_missing_tree_sitter_falls_back_to_ast(monkeypatch):
    # tree-sitter is installed here; simulate an environment where it is not importable
    def unavailable():
        raise ImportError("No module named 'tree_sitter'")

    monkeypatch.setattr(parser_module, "_tree_sitter", unavailable)
    parsed = parse_python(BASE)
    assert parsed.engine == "ast" and "tree-sitter failed" in (parsed.error or "")
    assert [d.qualname for d in parsed.definitions if d.kind == NodeKind.FUNCTION] == [
        "Shape.__init__", "Shape.describe", "Shape.label"]


def test_a_file_no_engine_can_parse_still_gets_a_file_node():
    graph = build_graph({"ok.py": "def f():\n    pass\n", "broken.py": "def (:\n"}, "r", "c", engine="ast")
    assert graph.nodes["file:broken.py"].kind == NodeKind.FILE
    assert "broken.py" in graph.parse_errors and "fn:ok.py::f" in graph.nodes


def _canonical(graph: CodeGraph) -> str:
    return json.dumps(graph.to_json(), sort_keys=True)


PATCHED_BASE = BASE.replace("return self.label()", "return self.tag()").replace("def label(self)", "def tag(self)")


def test_incremental_update_equals_a_full_rebuild_after_edits_adds_and_deletes():
    before = package_files()
    graph = build_graph(before, "acme/shapes", "c0ffee")
    changes: dict[str, str | None] = {
        "pkg/base.py": PATCHED_BASE,  # Shape.label renamed: Square.describe's self.label() no longer resolves
        "pkg/extra.py": "from pkg.shapes import Square\n\n\nclass Big(Square):\n    pass\n",
        "pkg/util.py": None,  # deleted: clamp/fmt calls and the util imports become unresolved
        "README.md": "# Shapes v2\n",
    }
    report = apply_changes(graph, changes)
    after = {**before, **{p: c for p, c in changes.items() if c is not None}}
    del after["pkg/util.py"]
    rebuilt = build_graph(after, "acme/shapes", "c0ffee")
    assert _canonical(graph) == _canonical(rebuilt)
    assert not report.structure_changed
    assert "pkg/shapes.py" in report.reresolved
    unresolved = {(e.src, e.dst) for e in graph.edges() if not e.resolved}
    assert ("fn:pkg/shapes.py::Square.describe", "self.label") in unresolved
    assert ("fn:pkg/shapes.py::Square.__init__", "clamp") in unresolved


def test_incremental_update_after_json_round_trip_and_package_layout_change():
    before = package_files()
    graph = CodeGraph.from_json(json.loads(json.dumps(build_graph(before, "acme/shapes", "c0ffee").to_json())))
    changes = {"pkg/sub/__init__.py": None, "tests/__init__.py": ""}  # pkg.sub stops being a package
    report = apply_changes(graph, changes)
    after = {**before, "tests/__init__.py": ""}
    del after["pkg/sub/__init__.py"]
    assert report.structure_changed
    assert _canonical(graph) == _canonical(build_graph(after, "acme/shapes", "c0ffee"))
    assert "pkg:pkg/sub" not in graph.nodes and graph.parent("file:pkg/sub/deep.py") == "pkg:pkg"


def test_json_round_trip_keeps_nodes_edges_and_texts(graph):
    restored = CodeGraph.from_json(json.loads(json.dumps(graph.to_json())))
    assert _canonical(restored) == _canonical(graph)
    assert restored.out_edges("cls:pkg/shapes.py::Square", EdgeKind.EXTENDS) == [
        Edge("cls:pkg/shapes.py::Square", "cls:pkg/base.py::Shape", EdgeKind.EXTENDS)]


def test_json_from_another_builder_version_is_refused(graph):
    data = graph.to_json()
    data["version"] = "old"
    with pytest.raises(ValueError, match="rebuild the graph"):
        CodeGraph.from_json(data)


def test_body_only_edit_re_resolves_only_the_edited_file():
    graph = build_graph(package_files(), "acme/shapes", "c0ffee")
    report = apply_changes(graph, {"pkg/base.py": BASE.replace("return self.name.upper()", "return self.name")})
    assert report.reresolved == ["pkg/base.py"]


def test_interface_change_re_resolves_only_the_files_that_consulted_the_file():
    graph = build_graph(package_files(), "acme/shapes", "c0ffee")
    report = apply_changes(graph, {"pkg/util.py": UTIL + "\n\ndef extra():\n    return 0\n"})
    assert report.reresolved == ["pkg/shapes.py", "pkg/util.py"]


def test_new_name_reached_through_a_star_import_is_picked_up_incrementally():
    files = {"lib/__init__.py": "", "lib/api.py": "def old():\n    pass\n",
             "app.py": "from lib.api import *\n\n\ndef main():\n    return new()\n"}
    graph = build_graph(files, "r", "c")
    assert ("fn:app.py::main", "new", False) in {(e.src, e.dst, e.resolved) for e in graph.edges()}
    changed = {"lib/api.py": "def old():\n    pass\n\n\ndef new():\n    pass\n"}
    report = apply_changes(graph, changed)
    assert "app.py" in report.reresolved
    assert ("fn:app.py::main", "fn:lib/api.py::new", True) in {(e.src, e.dst, e.resolved) for e in graph.edges()}
    assert _canonical(graph) == _canonical(build_graph({**files, **changed}, "r", "c"))


def test_a_nested_function_shadows_a_module_function_only_in_its_scope():
    source = ("def helper():\n    pass\n\n\nhelper()\n\n\ndef outer():\n    def helper():\n        pass\n\n"
              "    return helper()\n\n\ndef other():\n    return helper()\n")
    calls = {(e.src, e.dst) for e in build_graph({"m.py": source}, "r", "c").edges() if e.kind == EdgeKind.CALLS}
    assert ("file:m.py", "fn:m.py::helper") in calls
    assert ("fn:m.py::outer", "fn:m.py::outer.helper") in calls
    assert ("fn:m.py::other", "fn:m.py::helper") in calls


def test_parser_takes_calls_imports_and_definitions_from_code_only():
    """Candidates are found in the source bytes; words in strings and comments, `def f(`, `class A(` and
    `if (` must not count, and unusual but valid layouts must."""
    source = '''"""Module doc: fake(call) and import nothing; def ghost(): pass"""
import os  # import sys
from .import (alpha,  # see the import-outside-toplevel note
              beta)
pattern = os.compile \\
    (r"x")


class Shape(Base):
    """Call area(self) for the area."""

    def __init__(self):
        super().__init__()
        if (self.ready):
            self.log(f"{render(self)} # not_a_call(1)")

    @cached(size=2)
    async def area(self, x):
        return helper (x)
'''
    parsed = parse_python(source.encode(), engine="tree-sitter")
    names = {d.qualname for d in parsed.definitions}
    assert {"Shape", "Shape.__init__", "Shape.area", "pattern"} <= names and "ghost" not in names
    assert [(i.module, i.level, i.name) for i in parsed.imports] == [("os", 0, None), ("", 1, "alpha"),
                                                                     ("", 1, "beta")]
    callees = {name for _, name in parsed.calls}
    assert callees == {"os.compile", "super", "super().__init__", "self.log", "render", "cached", "helper"}
    assert len(parsed.calls) == len(set(parsed.calls))  # distinct (scope, callee) pairs
    area = next(d for d in parsed.definitions if d.qualname == "Shape.area")
    assert area.start_line == source.splitlines().index("    @cached(size=2)") + 1  # decorators included
    ast_callees = {name for _, name in parse_python(source.encode(), engine="ast").calls}
    assert ast_callees == callees


def test_a_name_bound_three_times_on_one_line_gives_one_contains_edge_per_node():
    graph = build_graph({"m.py": "_, _, _ = 1, 2, 3\n"}, "r", "c")  # ids `_`, `_@1`, `_@1`
    edges = list(graph.edges())
    assert len(edges) == len(set(edges))
    assert {e.dst for e in edges if e.kind == EdgeKind.CONTAINS and e.src == "file:m.py"} == {
        "attr:m.py::_", "attr:m.py::_@1"}
