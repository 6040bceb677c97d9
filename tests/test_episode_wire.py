"""The action protocol: tool calls or one JSON object in text, strict error codes, clamping, rendering."""

from __future__ import annotations

import json

import pytest

from graph_planner.episode.actions import (
    ACTION_NAMES,
    ExploreExpand,
    ExploreFind,
    MemoryCommit,
    MemoryDelete,
    Note,
    Read,
    Repair,
    RunTests,
    Submit,
    action_from_dict,
    action_to_dict,
    action_tool_schemas,
)
from graph_planner.episode.wire import (
    ActionParseError,
    parse_action,
    parse_action_detailed,
    render_action,
    render_tool_call,
    system_prompt,
)

ALL_ACTIONS = [
    ExploreFind(query="parse_price", limit=5),
    ExploreExpand(node_id="fn:pkg/mod.py::f", hop=2),
    Read(node_id="cls:pkg/mod.py::C", context_lines=3),
    MemoryCommit(node_ids=["fn:pkg/mod.py::f", "file:pkg/mod.py"], note="the bug"),
    MemoryDelete(node_ids=["file:pkg/mod.py"]),
    Note(text="rounding is wrong"),
    RunTests(),
    Repair(plan="use ROUND_HALF_UP", target_node_ids=["fn:pkg/mod.py::f"]),
    Submit(),
]


@pytest.mark.parametrize("action", ALL_ACTIONS, ids=lambda a: a.name)
def test_every_action_round_trips_through_text_tool_call_and_record(action):
    assert parse_action(render_action(action)) == action
    assert parse_action(render_tool_call(action)) == action
    assert parse_action({"role": "assistant", "content": None, "tool_calls": [render_tool_call(action)]}) == action
    assert action_from_dict(action_to_dict(action)) == action


def test_text_forms_accepted_fenced_and_after_think_block():
    text = '{"name": "read", "arguments": {"node_id": "fn:a.py::f"}}'
    assert parse_action(f"```json\n{text}\n```") == Read(node_id="fn:a.py::f")
    assert parse_action(f"<think>look at f first</think>\n{text}") == Read(node_id="fn:a.py::f")
    parsed = parse_action_detailed({"id": "c1", "type": "function",
                                    "function": {"name": "submit", "arguments": ""}})
    assert parsed.action == Submit() and parsed.source == "tool_call"


@pytest.mark.parametrize("output, code", [
    ("", "no-action"),
    ("I think we should look at the parser.", "no-action"),
    ('{"name": "read", "arguments": {"node_id": "a"}} {"name": "submit"}', "multiple-actions"),
    ('```json\n{"name": "submit"}\n```\n```json\n{"name": "submit"}\n```', "multiple-actions"),
    ({"content": "", "tool_calls": [render_tool_call(Submit()), render_tool_call(RunTests())]}, "multiple-actions"),
    ('{"name": "read", "arguments": {"node_id": }', "invalid-json"),
    ({"function": {"name": "read", "arguments": "{not json"}}, "invalid-json"),
    ('Sure! {"name": "submit"}', "extra-text"),
    ('{"name": "submit"} and then we are done', "extra-text"),
    ('{"name": "delete_repo", "arguments": {}}', "unknown-action"),
    ('{"arguments": {"query": "x"}}', "unknown-action"),
    ('{"name": "read", "arguments": {}}', "invalid-arguments"),
    ('{"name": "read", "node_id": "fn:a.py::f"}', "invalid-arguments"),
    ('{"name": "explore_find", "arguments": {"query": "x", "colour": "red"}}', "invalid-arguments"),
    ('{"name": "explore_expand", "arguments": {"node_id": "a", "hop": "far"}}', "invalid-arguments"),
])
def test_strict_parser_error_codes(output, code):
    with pytest.raises(ActionParseError) as err:
        parse_action(output)
    assert err.value.code == code
    assert err.value.detail


def test_out_of_range_values_are_clamped_with_warnings():
    parsed = parse_action_detailed(json.dumps({"name": "explore_expand",
                                               "arguments": {"node_id": "fn:a.py::f", "hop": 9, "limit": 0}}))
    assert parsed.action == ExploreExpand(node_id="fn:a.py::f", hop=3, limit=1)
    assert any("hop=9 clamped to 3" in w for w in parsed.warnings)
    assert any("limit=0 clamped to 1" in w for w in parsed.warnings)
    many = parse_action_detailed({"function": {"name": "memory_commit",
                                               "arguments": {"node_ids": [f"fn:a.py::f{i}" for i in range(14)]}}})
    assert len(many.action.node_ids) == 10
    assert any("14 items truncated to 10" in w for w in many.warnings)


def test_tool_schemas_are_generated_from_the_action_models():
    tools = action_tool_schemas()
    assert [t["function"]["name"] for t in tools] == list(ACTION_NAMES)
    assert len(tools) == 9
    expand = next(t for t in tools if t["function"]["name"] == "explore_expand")["function"]["parameters"]
    assert "name" not in expand["properties"]
    assert expand["required"] == ["node_id"]
    assert expand["properties"]["hop"]["maximum"] == 3 and expand["properties"]["hop"]["minimum"] == 1
    submit = next(t for t in tools if t["function"]["name"] == "submit")["function"]["parameters"]
    assert submit["properties"] == {}


def test_system_prompt_lists_every_tool_and_the_exact_output_form():
    prompt = system_prompt()
    for name in ACTION_NAMES:
        assert f"- {name}(" in prompt
    assert '{"name": "<action>", "arguments": {...}}' in prompt
    assert "node_ids: list[str]" in prompt
