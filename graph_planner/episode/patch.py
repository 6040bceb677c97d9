"""Patch forms a synthesiser may return (CGM line-range edits or a unified diff), how they are read out of model
text, and how both are normalised into ONE form: a git-style unified diff against the sandbox's current tree."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_FENCED = re.compile(r"```([a-zA-Z]*)\s*\n(.*?)```", re.DOTALL)
_DIFF_START = re.compile(r"^(diff --git |--- )", re.MULTILINE)


class PatchFormatError(ValueError):
    """A synthesiser output that is neither edits JSON nor a unified diff, or an edit that cannot be applied."""


@dataclass(frozen=True)
class FileEdit:
    """Replace lines ``start_line..end_line`` (1-based, inclusive) of ``path`` with ``new_text``.

    ``end_line = start_line - 1`` inserts before ``start_line``; ``start_line=1, end_line=0`` on a missing file
    creates it (the CGM edit form).
    """

    path: str
    start_line: int
    end_line: int
    new_text: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "start": self.start_line, "end": self.end_line, "new_text": self.new_text}


@dataclass
class RepairRequest:
    """What a synthesiser gets (the CGM request schema): the issue, the planner's plan, the memory subgraph
    (CGM-style nodes and edges), code snippets with line numbers, the planner's notes, and the constraints the
    patch guard will enforce."""

    task_id: str
    issue: str
    plan: str
    graph: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"nodes": [], "edges": []})
    snippets: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    target_node_ids: list[str] = field(default_factory=list)
    constraints: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id, "issue": self.issue, "plan": self.plan, "graph": self.graph,
            "snippets": self.snippets, "notes": self.notes, "targets": self.target_node_ids,
            "constraints": self.constraints,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RepairRequest:
        graph = data.get("graph") or {}
        return cls(
            task_id=str(data.get("task_id", "")), issue=str(data.get("issue", "")), plan=str(data.get("plan", "")),
            graph={"nodes": list(graph.get("nodes", [])), "edges": list(graph.get("edges", []))},
            snippets=list(data.get("snippets", [])), notes=list(data.get("notes", [])),
            target_node_ids=list(data.get("targets", [])), constraints=dict(data.get("constraints", {})),
        )


@dataclass
class PatchProposal:
    """What a synthesiser returned: edits or a diff (or neither, with ``error`` saying why)."""

    edits: list[FileEdit] | None = None
    diff: str | None = None
    raw: str = ""
    error: str | None = None
    diagnostic: str | None = None  # e.g. "gold": an upper-bound run, never a real result
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def has_patch(self) -> bool:
        return bool(self.edits) or bool(self.diff and self.diff.strip())

    def to_dict(self) -> dict[str, Any]:
        return {
            "edits": [e.to_dict() for e in self.edits] if self.edits is not None else None,
            "diff": self.diff, "raw": self.raw, "error": self.error, "diagnostic": self.diagnostic,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PatchProposal:
        edits = data.get("edits")
        return cls(
            edits=edits_from_json(edits) if edits is not None else None, diff=data.get("diff"),
            raw=data.get("raw", ""), error=data.get("error"), diagnostic=data.get("diagnostic"),
            prompt_tokens=int(data.get("prompt_tokens", 0)), completion_tokens=int(data.get("completion_tokens", 0)),
        )


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise PatchFormatError(f"edit {what} must be an integer line number, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise PatchFormatError(f"edit {what} must be an integer line number, got {value!r}") from None


def edits_from_json(items: Any) -> list[FileEdit]:
    """Read CGM edits ``[{path, start, end, new_text}]`` (aliases start_line/end_line/text accepted)."""
    if not isinstance(items, list):
        raise PatchFormatError(f"'edits' must be a list, got {type(items).__name__}")
    edits = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise PatchFormatError(f"edit #{i} must be an object, got {type(item).__name__}")
        path = item.get("path")
        text = item.get("new_text", item.get("text"))
        start = item.get("start", item.get("start_line"))
        end = item.get("end", item.get("end_line"))
        if not isinstance(path, str) or not path or text is None or start is None or end is None:
            raise PatchFormatError(f"edit #{i} needs path, start, end and new_text; got keys {sorted(item)}")
        if not isinstance(text, str):
            raise PatchFormatError(f"edit #{i} new_text must be a string")
        edits.append(FileEdit(path.strip(), _int(start, "start"), _int(end, "end"), text))
    return edits


def parse_patch_output(text: str) -> tuple[list[FileEdit] | None, str | None]:
    """Read a synthesiser's text: a JSON object with ``edits`` (or ``patch.edits``), or a unified diff.

    Either may be fenced. Raises :class:`PatchFormatError` naming what was found instead.
    """
    candidates = [body for _, body in _FENCED.findall(text)] or [text]
    for body in candidates:
        stripped = body.strip()
        if stripped.startswith("{"):
            try:
                obj, _ = json.JSONDecoder().raw_decode(stripped)
            except json.JSONDecodeError as exc:
                raise PatchFormatError(f"edits JSON is invalid: {exc.msg} at char {exc.pos}") from None
            return edits_from_payload(obj)
        match = _DIFF_START.search(body)
        if match:
            return None, normalise_diff_text(body[match.start():])
    raise PatchFormatError(f"no edits JSON or unified diff found in the output: {text.strip()[:120]!r}")


def edits_from_payload(obj: Any) -> tuple[list[FileEdit] | None, str | None]:
    """Read a decoded synthesiser payload: ``{edits}``, ``{patch: {edits}}``, ``{patch: "<diff>"}``, ``{diff}``."""
    if not isinstance(obj, dict):
        raise PatchFormatError(f"expected a JSON object, got {type(obj).__name__}")
    patch = obj.get("patch", obj)
    if isinstance(patch, str):
        return None, normalise_diff_text(patch)
    if isinstance(patch, dict):
        if patch.get("edits") is not None:
            return edits_from_json(patch["edits"]), None
        if isinstance(patch.get("diff"), str):
            return None, normalise_diff_text(patch["diff"])
    raise PatchFormatError(f"no 'edits' or 'diff' in the payload (keys: {sorted(obj)})")


def normalise_diff_text(diff: str) -> str:
    """Unified diff text with LF line ends and a final newline (git apply refuses a truncated last line)."""
    diff = diff.replace("\r\n", "\n")
    return diff if diff.endswith("\n") else diff + "\n"


def _file_diff(path: str, old: str | None, new: str) -> str:
    old_lines = (old or "").splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    for lines in (old_lines, new_lines):
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
    header = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if old is None else "")
    body = difflib.unified_diff(old_lines, new_lines, "/dev/null" if old is None else f"a/{path}", f"b/{path}")
    text = "".join(body)
    return header + text if text else ""


def edits_to_diff(edits: list[FileEdit], read_file: Callable[[str], str | None]) -> str:
    """Apply line-range edits to the current files (``read_file`` returns None for a missing file) and
    return the equivalent unified diff. Edits to one file are applied bottom-up so line numbers stay valid."""
    by_path: dict[str, list[FileEdit]] = {}
    for edit in edits:
        by_path.setdefault(edit.path, []).append(edit)
    parts = []
    for path, file_edits in by_path.items():
        old = read_file(path)
        lines = (old or "").splitlines(keepends=True)
        spans = sorted(file_edits, key=lambda e: (e.start_line, e.end_line), reverse=True)
        previous_start = len(lines) + 2
        for edit in spans:
            if old is None and not (edit.start_line == 1 and edit.end_line == 0):
                raise PatchFormatError(f"{path}: file does not exist; create it with start=1, end=0")
            if edit.start_line < 1 or edit.end_line < edit.start_line - 1 or edit.end_line > len(lines):
                raise PatchFormatError(
                    f"{path}: edit lines {edit.start_line}-{edit.end_line} outside the file (1-{len(lines)})")
            if edit.end_line >= previous_start:
                raise PatchFormatError(f"{path}: overlapping edits at lines {edit.start_line}-{edit.end_line}")
            new = edit.new_text
            if new and not new.endswith("\n"):
                new += "\n"
            lines[edit.start_line - 1:edit.end_line] = new.splitlines(keepends=True)
            previous_start = edit.start_line
        parts.append(_file_diff(path, old, "".join(lines)))
    return "".join(parts)


def diff_stats(diff: str) -> dict[str, int]:
    """Added / removed line counts of a unified diff (headers excluded)."""
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return {"added": added, "removed": removed}
