"""The wire format of actions between a model and the env: OpenAI tool calls, or ONE JSON object in text.

Text form (optionally inside one ```json fence, optionally after a leading <think>...</think> block):

    {"name": "explore_find", "arguments": {"query": "parse_price"}}

Anything else is an :class:`ActionParseError` with a stable error code, so parse failures can be counted,
penalised (``env.format_penalty``) and, with ``env.use_rule_fallback``, replaced by the rule policy's action.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from pydantic import ValidationError

from graph_planner.episode.actions import (
    ACTION_NAMES,
    ActionBase,
    action_tool_schemas,
    validate_action,
)

ParseErrorCode = Literal[
    "no-action", "multiple-actions", "invalid-json", "extra-text", "unknown-action", "invalid-arguments"
]
_THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.DOTALL)
EXPECTED_FORM = '{"name": "<action>", "arguments": {...}}'


class ActionParseError(ValueError):
    """A model output that is not exactly one valid action; ``code`` is one of :data:`ParseErrorCode`."""

    def __init__(self, code: ParseErrorCode, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code: ParseErrorCode = code
        self.detail = detail


@dataclass
class ParsedAction:
    """A parsed action plus the clamping warnings and where it came from."""

    action: ActionBase
    warnings: list[str] = field(default_factory=list)
    source: Literal["tool_call", "text", "action"] = "text"


def _from_name_and_arguments(name: Any, arguments: Any) -> tuple[ActionBase, list[str]]:
    if not isinstance(name, str) or not name:
        raise ActionParseError("unknown-action", f"missing action name; expected {EXPECTED_FORM}")
    if name not in ACTION_NAMES:
        raise ActionParseError("unknown-action", f"{name!r} is not an action; choose one of {', '.join(ACTION_NAMES)}")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ActionParseError("invalid-json", f"{name} arguments are not JSON: {exc.msg}") from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ActionParseError("invalid-arguments", f"{name} arguments must be an object, got {type(arguments).__name__}")
    try:
        return validate_action(name, arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'] if p != name) or 'arguments'}: {err['msg']}" for err in exc.errors()
        )
        raise ActionParseError("invalid-arguments", f"{name}: {problems}") from None


def _parse_tool_call(call: Mapping[str, Any]) -> ParsedAction:
    function = call.get("function", call)
    if not isinstance(function, Mapping):
        raise ActionParseError("invalid-arguments", "tool call without a 'function' object")
    action, warnings = _from_name_and_arguments(function.get("name"), function.get("arguments"))
    return ParsedAction(action, warnings, "tool_call")


def _parse_text(text: str) -> ParsedAction:
    text = _THINK.sub("", text, count=1).strip()
    if not text:
        raise ActionParseError("no-action", f"empty output; expected one JSON object {EXPECTED_FORM}")
    fences = _FENCE.findall(text)
    if len(fences) > 1:
        raise ActionParseError("multiple-actions", f"{len(fences)} fenced blocks; emit exactly one action")
    if fences:
        outside = _FENCE.sub("", text).strip()
        if outside:
            raise ActionParseError("extra-text", f"text outside the fenced action: {outside[:80]!r}")
        text = fences[0].strip()
    if not text.startswith("{"):
        if "{" in text:
            raise ActionParseError("extra-text", f"text before the JSON object: {text[:80]!r}")
        raise ActionParseError("no-action", f"no JSON object found; expected {EXPECTED_FORM}")
    decoder = json.JSONDecoder()
    try:
        obj, end = decoder.raw_decode(text)
    except json.JSONDecodeError as exc:
        raise ActionParseError("invalid-json", f"{exc.msg} at char {exc.pos}") from None
    rest = text[end:].strip()
    if rest:
        if rest.startswith("{"):
            raise ActionParseError("multiple-actions", "more than one JSON object; emit exactly one action")
        raise ActionParseError("extra-text", f"text after the JSON object: {rest[:80]!r}")
    if not isinstance(obj, dict):
        raise ActionParseError("invalid-json", f"expected a JSON object, got {type(obj).__name__}")
    unknown = set(obj) - {"name", "arguments"}
    if unknown:
        raise ActionParseError(
            "invalid-arguments", f"unexpected top-level keys {sorted(unknown)}; put fields inside 'arguments'"
        )
    action, warnings = _from_name_and_arguments(obj.get("name"), obj.get("arguments"))
    return ParsedAction(action, warnings, "text")


def parse_action_detailed(model_output: Any) -> ParsedAction:
    """Parse a model output: an action, a tool call, an assistant message, a list of tool calls, or text."""
    if isinstance(model_output, ActionBase):
        return ParsedAction(model_output, [], "action")
    if isinstance(model_output, str):
        return _parse_text(model_output)
    if isinstance(model_output, list):
        if not model_output:
            raise ActionParseError("no-action", "no tool calls")
        if len(model_output) > 1:
            raise ActionParseError("multiple-actions", f"{len(model_output)} tool calls; emit exactly one")
        return parse_action_detailed(model_output[0])
    if isinstance(model_output, Mapping):
        if "tool_calls" in model_output or "content" in model_output:
            calls = model_output.get("tool_calls") or []
            if calls:
                return parse_action_detailed(list(calls))
            return _parse_text(model_output.get("content") or "")
        if "function" in model_output:
            return _parse_tool_call(model_output)
        if "name" in model_output:
            unknown = set(model_output) - {"name", "arguments", "id", "type"}
            if unknown:
                raise ActionParseError(
                    "invalid-arguments", f"unexpected keys {sorted(unknown)}; put fields inside 'arguments'"
                )
            return _parse_tool_call(model_output)
    raise ActionParseError("no-action", f"cannot read an action from {type(model_output).__name__}")


def parse_action(model_output: Any) -> ActionBase:
    """Strictly parse one action (see module docstring); raises :class:`ActionParseError`."""
    return parse_action_detailed(model_output).action


def render_action(action: ActionBase) -> str:
    """The canonical text form of an action (what a model should emit in text mode): arguments left at their
    defaults are omitted, so the form is as short as the action allows (a small model imitates it more easily)."""
    return json.dumps({"name": action.name, "arguments": action.arguments(exclude_defaults=True)},  # type: ignore[attr-defined]
                      ensure_ascii=False, separators=(", ", ": "))


def render_tool_call(action: ActionBase, call_id: str = "call_0") -> dict[str, Any]:
    """The OpenAI tool-call dict of an action (for assistant messages in chat history)."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": action.name, "arguments": json.dumps(action.arguments(), ensure_ascii=False)},  # type: ignore[attr-defined]
    }


def _type_name(spec: Mapping[str, Any]) -> str:
    kind = spec.get("type", "string")
    if kind == "array":
        return f"list[{_type_name(spec.get('items', {}))}]"
    return {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}.get(kind, str(kind))


@lru_cache(maxsize=1)
def system_prompt() -> str:
    """The planner's system prompt: the job, the tools (from the action schemas), and the exact output form.
    Built once per process (every episode's policy asks for it)."""
    lines = [
        "You are a software engineer fixing a reported issue in a Python repository.",
        "You explore the repository's code graph, keep the relevant code in memory, then ask a patch",
        "synthesiser to repair it, and submit. Every node is shown with its id (e.g. fn:pkg/mod.py::Cls.meth);",
        "use ids exactly as shown.",
        "",
        "Tools:",
    ]
    for tool in action_tool_schemas():
        fn = tool["function"]
        params = fn["parameters"].get("properties", {})
        required = set(fn["parameters"].get("required", []))
        args = ", ".join(f"{p}{'' if p in required else '?'}: {_type_name(spec)}" for p, spec in params.items())
        lines.append(f"- {fn['name']}({args}): {fn['description']}")
    lines += [
        "",
        "Reply with exactly one action per turn: either a tool call, or one JSON object and nothing else:",
        EXPECTED_FORM,
        'Example: {"name": "explore_find", "arguments": {"query": "parse_config"}}',
        "Typical flow: explore_find -> explore_expand / read -> memory_commit -> repair -> submit.",
    ]
    return "\n".join(lines)
