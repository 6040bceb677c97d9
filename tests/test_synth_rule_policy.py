"""The rule demonstrator on synthesised bugs: a report that gives only symptoms (failing test ids and their
messages) is localised through the code graph — find the failing test, expand it, take the code it calls —
without the gold patch."""

from __future__ import annotations

from graph_planner.agents.rule_policy import (
    RulePolicy,
    SynthesizerOnlyPolicy,
    code_under_test,
    failing_tests,
    issue_queries,
    symptom_words,
)
from graph_planner.episode.actions import ExploreExpand, ExploreFind, MemoryCommit, Read
from graph_planner.episode.turns import Turn

ISSUE = """After a recent change, 2 test(s) of textkit fail:

- `tests/test_slug.py::test_unique_slug_adds_counter`: AssertionError: assert 'post-2' == 'post-3'
- `tests/test_markup.py::TestPlain::test_plain_keeps_link[a-b]`: AttributeError: 'PlainRenderer' object has no attribute 'render'

The other tests still pass. Please fix the code so that these tests pass again."""
TEST_ID = "fn:tests/test_slug.py::test_unique_slug_adds_counter"


def _node(node_id: str, kind: str = "FUNCTION", **extra: object) -> dict[str, object]:
    path = node_id.split(":", 1)[1].split("::", 1)[0]
    return {"id": node_id, "kind": kind, "path": path, **extra}


EXPANDED = [_node("file:tests/test_slug.py", "FILE", edge="contains", direction="in"),
            _node("fn:textkit/slug.py::slugify", edge="calls", direction="out"),
            _node("fn:tests/test_slug.py::test_slugify_basic", edge="calls", direction="in"),
            _node("fn:textkit/slug.py::unique_slug", edge="calls", direction="out")]


def _obs(last: dict | None = None, result: dict | None = None, memory: list[str] | None = None) -> dict:
    return {"issue": {"title": "2 tests fail in textkit", "text": ISSUE}, "steps_left": 5, "last_action": last,
            "result": result, "memory": {"nodes": memory or []}}


def _turn(name: str, **arguments: object) -> Turn:
    return Turn(prompt_messages=[], response_text="", action={"name": name, "arguments": arguments},
                observation="", reward=0.0)


def test_failing_tests_and_messages_are_read_from_a_symptom_report():
    assert failing_tests(ISSUE) == [("tests/test_slug.py", "test_unique_slug_adds_counter"),
                                    ("tests/test_markup.py", "TestPlain.test_plain_keeps_link")]
    assert {"PlainRenderer", "render"} <= symptom_words(ISSUE)
    # the failing tests' names are searched first; other names of the report after them
    assert issue_queries(ISSUE)[:2] == ["test_unique_slug_adds_counter", "test_plain_keeps_link"]


def test_the_code_under_test_is_the_callee_sharing_the_test_name_not_a_test_or_the_file():
    chosen = code_under_test(EXPANDED, "test_unique_slug_adds_counter", set())
    assert chosen is not None and chosen["id"] == "fn:textkit/slug.py::unique_slug"
    # a name the failure message gives wins over the listing order
    listing = [_node("fn:textkit/markup.py::escape_html", edge="calls", direction="out"),
               _node("cls:textkit/markup.py::PlainRenderer", "CLASS", edge="calls", direction="out")]
    chosen = code_under_test(listing, "TestPlain.test_plain_keeps_link", symptom_words(ISSUE))
    assert chosen is not None and chosen["id"] == "cls:textkit/markup.py::PlainRenderer"
    assert code_under_test([EXPANDED[0], EXPANDED[2]], "test_unique_slug_adds_counter", set()) is None


def test_rule_policy_goes_find_test_then_expand_it_then_read_the_code_it_calls():
    policy = RulePolicy()
    first = policy.next_action(_obs(), [])
    assert first == ExploreFind(query="test_unique_slug_adds_counter")
    found = {"query": first.query, "nodes": [_node(TEST_ID), _node("file:tests/test_slug.py", "FILE")]}
    history = [_turn("explore_find", query=first.query)]
    assert policy.next_action(_obs({"name": "explore_find"}, found), history) == ExploreExpand(node_id=TEST_ID, hop=1)
    history.append(_turn("explore_expand", node_id=TEST_ID, hop=1))
    expanded = {"node_id": TEST_ID, "hop": 1, "nodes": EXPANDED}
    assert policy.next_action(_obs({"name": "explore_expand"}, expanded), history) == Read(
        node_id="fn:textkit/slug.py::unique_slug")


def test_search_flow_commits_the_code_the_failing_test_calls():
    policy = SynthesizerOnlyPolicy()
    found = {"query": "test_unique_slug_adds_counter", "nodes": [_node(TEST_ID)]}
    history = [_turn("explore_find", query="test_unique_slug_adds_counter")]
    assert policy.next_action(_obs({"name": "explore_find"}, found), history) == ExploreExpand(node_id=TEST_ID, hop=1)
    history.append(_turn("explore_expand", node_id=TEST_ID, hop=1))
    action = policy.next_action(_obs({"name": "explore_expand"}, {"node_id": TEST_ID, "nodes": EXPANDED}), history)
    assert isinstance(action, MemoryCommit) and action.node_ids == ["fn:textkit/slug.py::unique_slug"]


def test_with_three_steps_left_the_explore_flow_commits_the_code_under_test_not_the_test():
    history = [_turn("explore_find", query="test_unique_slug_adds_counter"),
               _turn("explore_expand", node_id=TEST_ID, hop=1)]
    obs = {**_obs({"name": "explore_expand"}, {"node_id": TEST_ID, "hop": 1, "nodes": EXPANDED}), "steps_left": 3}
    action = RulePolicy().next_action(obs, history)
    assert isinstance(action, MemoryCommit) and action.node_ids[0] == "fn:textkit/slug.py::unique_slug"
    assert not any(i.startswith("fn:tests/") for i in action.node_ids)


def test_the_sft_demonstrator_searches_the_failing_test_a_cut_prompt_still_shows():
    """Prompts keep their last tokens: the demonstrator searches the test the report quotes last, then the
    others, so a demonstration never asks the model to type a name cut from its prompt when one is in view."""
    from graph_planner.training.sft.data import ExploringRulePolicy

    demonstrator = ExploringRulePolicy(0.0, seed=0, flow="search")
    first = demonstrator.next_action(_obs(), [])
    assert isinstance(first, ExploreFind) and first.query == "test_plain_keeps_link"
    second = demonstrator.next_action(_obs(), [_turn("explore_find", query="test_plain_keeps_link")])
    assert isinstance(second, ExploreFind) and second.query == "test_unique_slug_adds_counter"
    # a report without pytest ids is searched as before
    plain = {**_obs(), "issue": {"title": "slugify drops digits", "text": "`slugify('a1')` returns 'a'"}}
    assert demonstrator.next_action(plain, []) == RulePolicy().next_action(plain, [])
