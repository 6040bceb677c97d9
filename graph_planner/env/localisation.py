"""Localisation: where the gold patch changes the code, and how much of it the planner found.

The planner's real job is localisation: surfacing the right code to the synthesiser. These measures make it
visible for every run (any synthesiser, train and eval), from the task's hidden ``gold_patch``:

* **gold sites** — per file, the *old-side* line numbers the gold patch changes: every removed line of every
  hunk, and for a hunk that only adds lines, the old line the addition follows (the first line for an addition
  at the top of a file). Context lines are not changes.
* **gold nodes** — for each gold line, the innermost FUNCTION or CLASS node of the code graph whose span holds
  it, else the FILE node (a module-level change); deduplicated, in patch order.
* A set of nodes S **covers** a gold node g when some node of S is g or contains it (same file, its span holds
  g's span; a FILE node holds every node of its file). A node of S is **relevant** when it covers a gold node
  or a gold node covers it (a method of a gold class).

Per episode: recall/precision of the gold nodes in memory M (``m_recall``, ``m_precision``) and in the working
graph W (``w_recall``, ``w_precision``), the peak M recall over the episode (what a ``repair`` could have sent
at best), and ``first_gold_read_step``: the step of the first ``read`` whose node covers or is covered by a gold
node (None when none was read). Precision of an empty set is 0.

Nothing here is ever shown to the planner: the numbers go to ``info["episode"]["localisation"]`` only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from graph_planner.codegraph import CodeGraph, NodeKind
from graph_planner.episode.gold_sites import gold_sites

_CODE_KINDS = (NodeKind.FUNCTION, NodeKind.CLASS)


def gold_nodes(graph: CodeGraph, patch: str) -> list[str]:
    """The gold nodes of ``patch`` in ``graph`` (rule in the module docstring); [] without a usable patch."""
    out: list[str] = []
    for path, lines in gold_sites(patch).items():
        for line in lines:
            node_id = graph.innermost_at(path, line, _CODE_KINDS)
            if node_id is not None and node_id not in out:
                out.append(node_id)
    return out


def contains(graph: CodeGraph, outer_id: str, inner_id: str) -> bool:
    """Does node ``outer_id`` hold node ``inner_id`` (the same node, its file, or an enclosing span)?"""
    if outer_id == inner_id:
        return True
    outer, inner = graph.nodes.get(outer_id), graph.nodes.get(inner_id)
    if outer is None or inner is None or outer.path != inner.path:
        return False
    if outer.kind == NodeKind.FILE:
        return True
    if outer.kind not in _CODE_KINDS:
        return False
    return outer.start_line <= inner.start_line and inner.end_line <= outer.end_line


def recall_precision(graph: CodeGraph, gold: list[str], chosen: Iterable[str]) -> tuple[float, float]:
    """(share of gold nodes covered by ``chosen``, share of ``chosen`` relevant to a gold node)."""
    chosen = [c for c in chosen if c in graph.nodes]
    if not gold:
        return 0.0, 0.0
    recall = sum(1 for g in gold if any(contains(graph, c, g) for c in chosen)) / len(gold)
    relevant = sum(1 for c in chosen if any(contains(graph, c, g) or contains(graph, g, c) for g in gold))
    return recall, (relevant / len(chosen) if chosen else 0.0)


@dataclass
class LocalisationTracker:
    """Follows one episode: call :meth:`observe` after every step; :meth:`summary` at the end."""

    graph: CodeGraph
    gold: list[str]
    peak_m_recall: float = 0.0
    first_gold_read_step: int | None = None
    _last: dict[str, float] = field(default_factory=dict)

    @classmethod
    def for_task(cls, graph: CodeGraph, gold_patch: str | None) -> LocalisationTracker:
        return cls(graph, gold_nodes(graph, gold_patch or ""))

    @property
    def has_gold(self) -> bool:
        return bool(self.gold)

    def m_recall(self, memory_ids: Iterable[str]) -> float:
        return recall_precision(self.graph, self.gold, memory_ids)[0]

    def observe(self, step: int, memory_ids: Iterable[str], working_ids: Iterable[str],
                read_node: str | None = None) -> None:
        if not self.gold:
            return
        m_recall, m_precision = recall_precision(self.graph, self.gold, memory_ids)
        w_recall, w_precision = recall_precision(self.graph, self.gold, working_ids)
        self.peak_m_recall = max(self.peak_m_recall, m_recall)
        if read_node is not None and self.first_gold_read_step is None and any(
                contains(self.graph, read_node, g) or contains(self.graph, g, read_node) for g in self.gold):
            self.first_gold_read_step = step
        self._last = {"m_recall": m_recall, "m_precision": m_precision, "w_recall": w_recall,
                      "w_precision": w_precision}

    def summary(self) -> dict[str, Any] | None:
        """The episode's localisation record (None when the task has no gold patch to measure against)."""
        if not self.gold:
            return None
        last = self._last or {"m_recall": 0.0, "m_precision": 0.0, "w_recall": 0.0, "w_precision": 0.0}
        return {"gold_nodes": list(self.gold), **{k: round(v, 4) for k, v in last.items()},
                "peak_m_recall": round(self.peak_m_recall, 4), "first_gold_read_step": self.first_gold_read_step}
