"""Planner queries on the code graph: find ranking and terms, expand hops and diversity, read, linearisation."""

from __future__ import annotations

import pytest
from test_codegraph_fixtures import SHAPES, line_of, package_files

from graph_planner.codegraph.builder import apply_changes, build_graph
from graph_planner.codegraph.graph import CodeGraph, UnknownNodeError
from graph_planner.codegraph.linearize import count_tokens, linearize, to_cgm_payload
from graph_planner.codegraph.query import expand, find, read


@pytest.fixture(scope="module")
def graph() -> CodeGraph:
    return build_graph(package_files(), "acme/shapes", "c0ffee")


def ids(hits) -> list[str]:
    return [hit.node.id for hit in hits]


def test_find_ranks_exact_name_over_prefix_over_substring(graph):
    hits = find(graph, "square")
    assert hits[0].node.id == "cls:pkg/shapes.py::Square"
    assert any("name = 'square'" in reason for reason in hits[0].reasons)
    ranked = ids(find(graph, "area"))
    # exact `area` before prefix `area_of`, before substring-only matches in tests
    assert ranked.index("fn:pkg/shapes.py::Square.area") < ranked.index("fn:pkg/shapes.py::area_of")
    assert ranked.index("fn:pkg/shapes.py::area_of") < ranked.index("fn:tests/test_shapes.py::test_area")


def test_find_is_case_insensitive_and_matches_dotted_qualnames(graph):
    assert find(graph, "SHAPE.LABEL")[0].node.id == "fn:pkg/base.py::Shape.label"


def test_symbol_term_keeps_only_classes_functions_attributes(graph):
    hits = find(graph, "symbol:shape")
    assert hits and all(hit.node.kind.value in ("CLASS", "FUNCTION", "ATTRIBUTE") for hit in hits)
    assert hits[0].node.id == "cls:pkg/base.py::Shape"


def test_path_terms_filter_and_rank_files(graph):
    assert find(graph, "path:util")[0].node.id == "file:pkg/util.py"
    assert set(ids(find(graph, "fmt path:pkg/util.py"))) == {"fn:pkg/util.py::fmt"}
    assert find(graph, "path:*.cfg")[0].node.id == "file:setup.cfg"


def test_quoted_phrase_searches_code_and_lands_on_the_innermost_node(graph):
    hit = find(graph, '"x * x"')[0]
    assert hit.node.id == "fn:pkg/shapes.py::Square.area.squared"
    assert f"text 'x * x' at line {line_of(SHAPES, 'x * x')}" in hit.reasons


def test_plus_and_minus_terms(graph):
    with_clamp = ids(find(graph, "side +clamp"))
    assert "fn:pkg/shapes.py::Square.__init__" in with_clamp  # mentions side and clamp
    assert "fn:pkg/shapes.py::Square.area" not in with_clamp  # mentions side, not clamp
    no_tests = ids(find(graph, "area -test"))
    assert no_tests and not any("tests/" in node_id for node_id in no_tests)


def test_find_with_no_match_returns_nothing(graph):
    assert find(graph, "zzzqqq") == []


def test_expand_hop_one_and_two(graph):
    one = {hit.node.id: hit for hit in expand(graph, "cls:pkg/shapes.py::Square", hop=1, limit=50)}
    assert one["cls:pkg/base.py::Shape"].edge.value == "extends" and one["cls:pkg/base.py::Shape"].hop == 1
    assert "cls:pkg/sub/deep.py::Cube" in one  # subclass, reached backwards
    assert "fn:pkg/shapes.py::Square.area" in one and "file:pkg/shapes.py" in one
    assert "fn:pkg/base.py::Shape.label" not in one
    two = {hit.node.id: hit for hit in expand(graph, "cls:pkg/shapes.py::Square", hop=2, limit=100)}
    assert two["fn:pkg/base.py::Shape.label"].hop == 2
    assert set(one) <= set(two)


def test_expand_interleaves_directories_and_prefers_non_test_code():
    files = {"core/hub.py": "def hub():\n    return 1\n"}
    for index in range(6):
        files[f"core/user{index}.py"] = f"from core.hub import hub\n\n\ndef use{index}():\n    return hub()\n"
    files["plugins/ext.py"] = "from core.hub import hub\n\n\ndef ext():\n    return hub()\n"
    files["tests/test_hub.py"] = "from core.hub import hub\n\n\ndef test_hub():\n    assert hub() == 1\n"
    graph = build_graph(files, "r", "c")
    hits = expand(graph, "fn:core/hub.py::hub", hop=1, limit=3)
    assert len(hits) == 3
    assert {hit.node.path.split("/")[0] for hit in hits} == {"core", "plugins", "tests"}
    everything = expand(graph, "fn:core/hub.py::hub", hop=1, limit=50)
    scores = {hit.node.id: hit.score for hit in everything}
    assert scores["fn:tests/test_hub.py::test_hub"] < scores["fn:plugins/ext.py::ext"]


def test_read_returns_the_exact_numbered_lines(graph):
    result = read(graph, "fn:pkg/shapes.py::Square.area")
    lines = SHAPES.splitlines()
    start, end = line_of(SHAPES, "def area"), line_of(SHAPES, "return squared")
    assert (result.path, result.start_line, result.end_line) == ("pkg/shapes.py", start, end)
    expected = [f"{n:>2} | {lines[n - 1]}" for n in range(start, end + 1)]
    assert result.text.splitlines() == expected
    wider = read(graph, "fn:pkg/shapes.py::Square.area", context_lines=2)
    assert (wider.start_line, wider.end_line) == (start - 2, end + 2)
    capped = read(graph, "file:pkg/shapes.py", max_lines=5)
    assert capped.truncated and capped.text.splitlines()[0] == f"1 | {lines[0]}"


def test_unknown_node_id_error_names_it_and_suggests_close_ids(graph):
    with pytest.raises(UnknownNodeError) as info:
        read(graph, "fn:pkg/shapes.py::Squar")
    message = str(info.value)
    assert "fn:pkg/shapes.py::Squar" in message and "cls:pkg/shapes.py::Square" in message


SELECTION = ["cls:pkg/shapes.py::Square", "cls:pkg/base.py::Shape", "fn:pkg/util.py::clamp",
             "fn:pkg/shapes.py::Square.area", "file:pkg/sub/deep.py", "file:README.md"]


def test_linearize_groups_by_file_with_code_and_dependency_edges(graph):
    text = linearize(graph, SELECTION, token_budget=5000)
    assert text.index("### pkg/shapes.py") < text.index("### pkg/base.py")  # first-priority file first
    assert "[cls:pkg/shapes.py::Square] class class Square(BaseShape)" in text
    assert f"{line_of(SHAPES, 'self.side = clamp')} |         self.side = clamp(side)" in text
    assert "(code shown in cls:pkg/shapes.py::Square)" in text  # Square.area lies inside Square
    assert "class Cube(Square)" in text  # FILE nodes show their skeleton
    assert "cls:pkg/shapes.py::Square --extends--> cls:pkg/base.py::Shape" in text
    assert "fn:pkg/shapes.py::Square.__init__" not in text.split("### dependencies")[1]  # not selected


@pytest.mark.parametrize("budget", [40, 120, 300, 700])
def test_linearize_never_exceeds_the_budget(graph, budget):
    text = linearize(graph, SELECTION, token_budget=budget)
    assert count_tokens(text) <= budget
    assert "cls:pkg/shapes.py::Square" in text or budget < 60


def test_linearize_budget_with_a_real_tokenizer_callable(graph):
    def words(text: str) -> int:
        return len(text.split())

    text = linearize(graph, SELECTION, token_budget=60, tokenizer=words)
    assert 0 < words(text) <= 60
    assert "more lines" in text  # the first node was trimmed, not dropped


def test_cgm_payload_has_cgm_fields_the_contains_path_and_edges(graph):
    payload = to_cgm_payload(graph, ["fn:pkg/shapes.py::Square.area", "cls:pkg/base.py::Shape"], budget=2000)
    nodes = {node["id"]: node for node in payload["nodes"]}
    assert {"repo", "pkg:pkg", "file:pkg/shapes.py", "cls:pkg/shapes.py::Square"} <= set(nodes)
    area = nodes["fn:pkg/shapes.py::Square.area"]
    assert area["nodeType"] == "Function" and area["filePath"] == "pkg/shapes.py"
    assert area["text"].startswith("    def area(self):") and area["startLine"] == line_of(SHAPES, "def area")
    assert nodes["repo"]["nodeType"] == "Repo" and nodes["pkg:pkg"]["nodeType"] == "Package"
    edges = {(e["src"], e["dst"], e["edgeType"]) for e in payload["edges"]}
    assert ("cls:pkg/shapes.py::Square", "fn:pkg/shapes.py::Square.area", "contains") in edges
    assert ("cls:pkg/shapes.py::Square", "cls:pkg/base.py::Shape", "extends") in edges
    small = to_cgm_payload(graph, ["cls:pkg/shapes.py::Square"], budget=20)
    assert sum(count_tokens(n["text"]) for n in small["nodes"]) <= 20


def test_find_sees_names_added_by_an_incremental_update():
    graph = build_graph(package_files(), "acme/shapes", "c0ffee")
    assert find(graph, "symbol:rescale") == []
    apply_changes(graph, {"pkg/util.py": "def rescale(x):\n    return x * 2\n"})
    assert find(graph, "symbol:rescale")[0].node.id == "fn:pkg/util.py::rescale"
    assert "fn:pkg/util.py::clamp" not in ids(find(graph, "clamp"))  # removed by the update
