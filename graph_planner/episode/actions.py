"""The planner's nine actions as pydantic models, their bounds, and the OpenAI tool schemas generated from them.

Out-of-range numbers and over-long lists/strings are clamped to the declared bounds (never rejected) and every
clamp is reported as a warning string, which the env puts into the step's info.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

NodeId = Annotated[str, Field(min_length=1, max_length=300, description="A node id exactly as shown, e.g. fn:pkg/mod.py::f")]


class ActionBase(BaseModel):
    """Base of every action: unknown arguments are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def arguments(self, exclude_defaults: bool = False) -> dict[str, Any]:
        """The tool-call arguments (every field but ``name``; without those left at their defaults if asked)."""
        return self.model_dump(exclude={"name"}, exclude_defaults=exclude_defaults)


class ExploreFind(ActionBase):
    """Search the repository's code graph by name, path or text; returns ranked node ids."""

    name: Literal["explore_find"] = "explore_find"
    query: str = Field(min_length=1, max_length=200, description="Identifier, path, `symbol:X`, `path:X` or text.")
    limit: int = Field(10, ge=1, le=50, description="Maximum results.")


class ExploreExpand(ActionBase):
    """List the neighbours of a node (contains/imports/calls/extends, both directions) within `hop` edges."""

    name: Literal["explore_expand"] = "explore_expand"
    node_id: NodeId
    hop: int = Field(1, ge=1, le=3, description="Graph distance to expand (1-3).")
    limit: int = Field(10, ge=1, le=50, description="Maximum neighbours shown.")


class Read(ActionBase):
    """Show the real source code of a node, with 1-based line numbers."""

    name: Literal["read"] = "read"
    node_id: NodeId
    context_lines: int = Field(0, ge=0, le=20, description="Extra lines shown before and after the node.")


class MemoryCommit(ActionBase):
    """Add nodes (with their code) to memory M, the evidence the patch synthesiser will see."""

    name: Literal["memory_commit"] = "memory_commit"
    node_ids: list[NodeId] = Field(min_length=1, max_length=10, description="Nodes to remember.")
    note: str = Field("", max_length=500, description="Why these nodes matter (shown to the synthesiser).")


class MemoryDelete(ActionBase):
    """Remove nodes from memory M."""

    name: Literal["memory_delete"] = "memory_delete"
    node_ids: list[NodeId] = Field(min_length=1, max_length=10, description="Nodes to forget.")


class Note(ActionBase):
    """Record a free-text note (kept in memory and passed to the synthesiser)."""

    name: Literal["note"] = "note"
    text: str = Field(min_length=1, max_length=500, description="The note.")


class RunTests(ActionBase):
    """Run the failing tests of the task; shows which fail and why (never the test source)."""

    name: Literal["run_tests"] = "run_tests"


class Repair(ActionBase):
    """Ask the patch synthesiser for a fix built from memory M; applied, checked and tested, or rolled back."""

    name: Literal["repair"] = "repair"
    plan: str = Field(min_length=1, max_length=2000, description="What to change and why, in words.")
    target_node_ids: list[NodeId] = Field(
        default_factory=list, max_length=10, description="Nodes in memory the patch should change."
    )


class Submit(ActionBase):
    """End the episode and have the current repository graded."""

    name: Literal["submit"] = "submit"


Action = Annotated[
    ExploreFind | ExploreExpand | Read | MemoryCommit | MemoryDelete | Note | RunTests | Repair | Submit,
    Field(discriminator="name"),
]
ACTION_TYPES: dict[str, type[ActionBase]] = {
    cls.model_fields["name"].default: cls
    for cls in (ExploreFind, ExploreExpand, Read, MemoryCommit, MemoryDelete, Note, RunTests, Repair, Submit)
}
ACTION_NAMES: tuple[str, ...] = tuple(ACTION_TYPES)
_ADAPTER: TypeAdapter[Any] = TypeAdapter(Action)


def _bounds(metadata: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            out["ge"] = item.ge
        elif isinstance(item, annotated_types.Le):
            out["le"] = item.le
        elif isinstance(item, annotated_types.MaxLen):
            out["max_len"] = item.max_length
    return out


def clamp_arguments(name: str, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Clamp numbers to [ge, le] and truncate lists/strings to their max length; one warning per change.

    Values of the wrong type are left alone so validation reports them.
    """
    model = ACTION_TYPES[name]
    args = dict(arguments)
    warnings: list[str] = []
    for field_name, info in model.model_fields.items():
        if field_name not in args or field_name == "name":
            continue
        value, bounds = args[field_name], _bounds(info.metadata)
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            if isinstance(value, float) and value.is_integer() and info.annotation is int:
                value = int(value)
            clamped = value
            if "ge" in bounds and value < bounds["ge"]:
                clamped = bounds["ge"]
            if "le" in bounds and value > bounds["le"]:
                clamped = bounds["le"]
            if clamped != value:
                warnings.append(f"{name}.{field_name}={value!r} clamped to {clamped!r}")
            args[field_name] = clamped
        elif isinstance(value, (list, str)) and "max_len" in bounds and len(value) > bounds["max_len"]:
            kind = "items" if isinstance(value, list) else "characters"
            warnings.append(f"{name}.{field_name}: {len(value)} {kind} truncated to {bounds['max_len']}")
            args[field_name] = value[: bounds["max_len"]]
    return args, warnings


def validate_action(name: str, arguments: Mapping[str, Any]) -> tuple[ActionBase, list[str]]:
    """Build an action from a name and arguments (clamped first); raises KeyError / pydantic ValidationError."""
    if name not in ACTION_TYPES:
        raise KeyError(name)
    args, warnings = clamp_arguments(name, arguments)
    action = _ADAPTER.validate_python({**args, "name": name})
    return action, warnings


def action_from_dict(data: Mapping[str, Any]) -> ActionBase:
    """Rebuild an action from its ``{"name", "arguments"}`` record (trajectory JSONL)."""
    action, _ = validate_action(str(data["name"]), data.get("arguments") or {})
    return action


def action_to_dict(action: ActionBase) -> dict[str, Any]:
    """The ``{"name", "arguments"}`` record of an action, the same shape as an OpenAI tool call."""
    return {"name": action.name, "arguments": action.arguments()}  # type: ignore[attr-defined]


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def action_tool_schemas() -> list[dict[str, Any]]:
    """OpenAI `tools` definitions, generated from the action models (bounds and descriptions included).
    A fresh copy each call (the caller may edit it) of what is generated once per process: pydantic's schema
    generation costs ~25 ms, and every episode's policy asks for it."""
    return copy.deepcopy(_action_tool_schemas())


@lru_cache(maxsize=1)
def _action_tool_schemas() -> list[dict[str, Any]]:
    tools = []
    for name, model in ACTION_TYPES.items():
        schema = _strip_titles(model.model_json_schema())
        schema["properties"].pop("name", None)
        schema["required"] = [r for r in schema.get("required", []) if r != "name"]
        if not schema["required"]:
            schema.pop("required")
        schema.pop("description", None)
        tools.append({
            "type": "function",
            "function": {"name": name, "description": (model.__doc__ or "").strip(), "parameters": schema},
        })
    return tools
