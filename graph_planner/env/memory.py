"""The planner's two memories. W (working graph): every node the planner has been shown, most recent last,
capped (oldest evicted first, never a node that is in M). M (memory): the evidence the planner curated for the
patch synthesiser, each entry hydrated with the node's real code; capped (commits beyond the cap are refused)."""

from __future__ import annotations

import difflib
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from graph_planner.codegraph import CodeGraph, UnknownNodeError, node_or_error, read

#: Code lines kept per memory entry (a whole file committed as evidence is cut, with a marker).
MAX_ENTRY_LINES = 200
MAX_NOTES = 20


@dataclass
class MemoryEntry:
    node_id: str
    kind: str
    path: str
    start_line: int
    end_line: int
    code: str  # the node's code, 1-based numbered
    note: str = ""

    def snippet(self) -> dict[str, Any]:
        """The synthesiser's snippet: plain code lines (numbers stripped) with their span."""
        plain = "\n".join(line.split(" | ", 1)[1] if " | " in line else line for line in self.code.splitlines())
        return {"node_id": self.node_id, "path": self.path, "start_line": self.start_line,
                "end_line": self.end_line, "code": plain, "note": self.note}


@dataclass
class CommitResult:
    added: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)


def unknown_node_reason(graph: CodeGraph, node_id: str) -> str:
    """Why a node id is refused, with the closest real ids (the LLM's typo is usually one character)."""
    close = difflib.get_close_matches(node_id, list(graph.nodes), n=3, cutoff=0.6)
    hint = f" Did you mean: {', '.join(close)}?" if close else " Use explore_find to list real node ids."
    return f"unknown node id {node_id!r}.{hint}"


class Memory:
    def __init__(self, working_max_nodes: int, memory_max_nodes: int) -> None:
        self.working_max = working_max_nodes
        self.memory_max = memory_max_nodes
        self.working: OrderedDict[str, None] = OrderedDict()
        self.entries: dict[str, MemoryEntry] = {}
        self.notes: list[str] = []

    # --- W ------------------------------------------------------------------------------------------------
    def see(self, node_ids: Iterable[str]) -> int:
        """Add shown nodes to W (refreshing their recency); returns how many old nodes were evicted."""
        for node_id in node_ids:
            self.working[node_id] = None
            self.working.move_to_end(node_id)
        evicted = 0
        for node_id in list(self.working):
            if len(self.working) <= self.working_max:
                break
            if node_id not in self.entries:
                del self.working[node_id]
                evicted += 1
        return evicted

    def working_edges(self, graph: CodeGraph) -> int:
        return sum(1 for src in self.working for e in graph.out_edges(src, resolved_only=True) if e.dst in self.working)

    # --- M ------------------------------------------------------------------------------------------------
    def _hydrate(self, graph: CodeGraph, node_id: str, note: str) -> MemoryEntry:
        node = node_or_error(graph, node_id)
        result = read(graph, node_id, max_lines=MAX_ENTRY_LINES)
        return MemoryEntry(node_id, node.kind.value, result.path, result.start_line, result.end_line, result.text,
                           note)

    def commit(self, graph: CodeGraph, node_ids: Iterable[str], note: str = "") -> CommitResult:
        out = CommitResult()
        for node_id in node_ids:
            if node_id in self.entries:
                out.already.append(node_id)
                if note:
                    self.entries[node_id].note = note
                continue
            if node_id not in graph.nodes:
                out.rejected[node_id] = unknown_node_reason(graph, node_id)
                continue
            if graph.nodes[node_id].kind.value == "REPO":
                out.rejected[node_id] = "the REPO node holds no code; commit files, classes or functions"
                continue
            if len(self.entries) >= self.memory_max:
                out.rejected[node_id] = (f"memory is full ({self.memory_max} nodes, env.memory_max_nodes); "
                                         "memory_delete something first")
                continue
            self.entries[node_id] = self._hydrate(graph, node_id, note)
            out.added.append(node_id)
        self.see(out.added + out.already)
        return out

    def delete(self, node_ids: Iterable[str]) -> tuple[list[str], list[str]]:
        removed, missing = [], []
        for node_id in node_ids:
            if self.entries.pop(node_id, None) is None:
                missing.append(node_id)
            else:
                removed.append(node_id)
        return removed, missing

    def add_note(self, text: str) -> None:
        self.notes.append(text)
        del self.notes[:-MAX_NOTES]

    def rehydrate(self, graph: CodeGraph) -> list[str]:
        """Refresh M's code after the tree changed (a kept patch); returns ids that no longer exist (dropped)."""
        dropped = []
        for node_id, entry in list(self.entries.items()):
            try:
                self.entries[node_id] = self._hydrate(graph, node_id, entry.note)
            except UnknownNodeError:
                del self.entries[node_id]
                dropped.append(node_id)
        for node_id in dropped:
            self.working.pop(node_id, None)
        for node_id in [n for n in self.working if n not in graph.nodes]:
            del self.working[node_id]
        return dropped

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory": {"nodes": list(self.entries), "max": self.memory_max, "notes": list(self.notes)},
            "working": {"nodes": len(self.working), "max": self.working_max},
        }
