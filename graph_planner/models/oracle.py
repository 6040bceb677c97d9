"""The ``oracle`` synthesiser: DIAGNOSTIC ONLY, a learnable localisation signal for CPU runs.

It returns the task's real gold patch **only when the repair request holds the code the gold patch touches**,
else a proposal that fails (no patch, with the reason). It never invents or alters a patch.

The rule ("holds the code"): every gold site (:func:`graph_planner.episode.gold_sites.gold_sites`: the old-side
lines the gold patch removes, and the line each pure addition follows) must lie inside the line span of a
snippet of the request, in the same file. The snippets are memory M's entries as sent to the synthesiser (within
``env.synthesis_token_budget``), so a change inside a function needs that function (or its class, or its file)
in M, and a module-level change (an import) needs the file. A task whose gold patch only creates files has no
site to find; the oracle then behaves like ``gold``.

So the reward of a run with this synthesiser depends on what the planner found and committed, which is what a
strong synthesiser such as CGM also depends on. Results carry ``diagnostic: oracle``; never a default.
"""

from __future__ import annotations

from typing import Any

from graph_planner.data.record import TaskRecord
from graph_planner.episode.gold_sites import gold_sites
from graph_planner.episode.patch import PatchProposal, RepairRequest


def missing_sites(request: RepairRequest, sites: dict[str, list[int]]) -> dict[str, list[int]]:
    """Gold sites no snippet of ``request`` holds: ``{path: [lines]}`` (empty when the request holds them all)."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for snip in request.snippets:
        try:
            start, end = int(snip.get("start_line", 0)), int(snip.get("end_line", 0))
        except (TypeError, ValueError):
            continue
        spans.setdefault(str(snip.get("path", "")), []).append((start, end))
    missing: dict[str, list[int]] = {}
    for path, lines in sites.items():
        held = spans.get(path, [])
        gaps = [line for line in lines if not any(start <= line <= end for start, end in held)]
        if gaps:
            missing[path] = gaps
    return missing


class OracleSynthesizer:
    """DIAGNOSTIC: the gold patch when the request's memory holds every gold site, else no patch (see module)."""

    name = "oracle"

    def __init__(self, task: TaskRecord) -> None:
        self.task = task
        self.sites = gold_sites(task.gold_patch or "")

    def synthesize(self, request: RepairRequest) -> PatchProposal:
        if not self.task.gold_patch:
            return PatchProposal(error=f"no-gold-patch: task {self.task.task_id} has none", diagnostic="oracle")
        missing = missing_sites(request, self.sites)
        if missing:
            where = "; ".join(f"{path} lines {', '.join(map(str, lines))}" for path, lines in sorted(missing.items()))
            meta: dict[str, Any] = {"missing_sites": missing}
            return PatchProposal(error=f"oracle-withheld: memory M does not hold the code to change ({where})",
                                 diagnostic="oracle", meta=meta)
        return PatchProposal(diff=self.task.gold_patch, raw=self.task.gold_patch, diagnostic="oracle")
