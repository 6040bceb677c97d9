"""Observations: a compact text for the model (node ids always shown, so every id it needs can be typed back)
and the same content as a structured dict for policies, logs and replay. No timings in the text: replaying an
episode must give the same observations."""

from __future__ import annotations

from typing import Any

from graph_planner.codegraph import CodeGraph, Node, NodeKind
from graph_planner.data.record import TaskRecord
from graph_planner.env.memory import Memory

OUTLINE_LIMIT = 40
_ISSUE_CHARS = 4000
#: Characters per token of the observation budget (the rule env.synthesis_token_budget uses too).
CHARS_PER_TOKEN = 4


def clip_middle(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and tail around a marker saying how much was cut (verl's
    tool agent loop cuts a long tool response the same way, ``tool_response_truncate_side=middle``)."""
    if len(text) <= limit:
        return text
    template = "\n... [{} characters cut from the middle of this result] ...\n"
    keep = max(limit - len(template.format("9" * len(str(len(text))))), 0)
    marker = template.format(len(text) - keep)
    head = keep // 2
    return text[:head] + marker + text[len(text) - (keep - head):]


def node_summary(node: Node, **extra: Any) -> dict[str, Any]:
    return {"id": node.id, "kind": node.kind.value, "path": node.path, "start_line": node.start_line,
            "end_line": node.end_line, "signature": node.signature, **extra}


def node_line(summary: dict[str, Any], prefix: str = "") -> str:
    where = summary["path"]
    if summary.get("start_line"):
        where += f":{summary['start_line']}-{summary['end_line']}"
    sig = f"  {summary['signature']}" if summary.get("signature") else ""
    return f"  {prefix}{summary['id']}  ({summary['kind']}, {where}){sig}"


def outline(graph: CodeGraph, limit: int = OUTLINE_LIMIT) -> list[dict[str, Any]]:
    """Packages and files of the repository (tests last), the planner's starting map."""
    nodes = [n for n in graph.nodes.values() if n.kind in (NodeKind.PACKAGE, NodeKind.FILE)]
    nodes.sort(key=lambda n: ("test" in n.path.split("/")[0] or "/test" in n.path, n.path, n.kind.value))
    return [node_summary(n) for n in nodes[:limit]]


def issue_text(task: TaskRecord) -> str:
    text = task.problem_statement.strip()
    return text if len(text) <= _ISSUE_CHARS else text[:_ISSUE_CHARS] + "\n... (issue truncated)"


def _render_result(name: str, result: dict[str, Any]) -> list[str]:
    if name == "explore_find":
        lines = [f"explore_find({result['query']!r}): {len(result['nodes'])} node(s)"]
        lines += [node_line(n) for n in result["nodes"]]
        if not result["nodes"]:
            lines.append("  no match; try another name, `path:<file>` or a phrase from the issue")
        return lines
    if name == "explore_expand":
        lines = [f"explore_expand({result['node_id']}, hop={result['hop']}): {len(result['nodes'])} neighbour(s)"]
        lines += [node_line(n, prefix=f"{n['edge']}{'->' if n['direction'] == 'out' else '<-'} ")
                  for n in result["nodes"]]
        return lines
    if name == "read":
        head = f"read({result['node_id']}): {result['path']} lines {result['start_line']}-{result['end_line']}"
        return [head, result["code"]]
    if name == "memory_commit":
        lines = [f"memory_commit: added {result['added'] or 'nothing'}"]
        if result["already"]:
            lines.append(f"  already in memory: {result['already']}")
        lines += [f"  refused {node_id}: {reason}" for node_id, reason in result["rejected"].items()]
        return lines
    if name == "memory_delete":
        lines = [f"memory_delete: removed {result['removed'] or 'nothing'}"]
        if result["missing"]:
            lines.append(f"  not in memory: {result['missing']}")
        return lines
    if name == "note":
        return [f"note recorded ({result['notes']} note(s))"]
    if name == "run_tests":
        return _render_tests("run_tests", result)
    if name == "repair":
        return _render_repair(result)
    if name == "submit":
        if result.get("tampered"):
            return ["submit: TAMPERED"]
        return [f"submit: {'RESOLVED' if result['resolved'] else 'not resolved'}"]
    return [f"{name}: {result}"]


def _render_tests(head: str, tests: dict[str, Any]) -> list[str]:
    if tests.get("tampered"):
        return [f"{head}: tampered"]
    lines = [f"{head}: {tests['passing']}/{tests['total']} of the failing tests pass"
             + (" (task resolved)" if tests.get("resolved") else "")]
    if tests.get("error"):
        lines.append(f"  test run problem: {tests['error']}")
    lines += [f"  {symptom}" for symptom in tests.get("failing", [])]
    return lines


def _render_repair(result: dict[str, Any]) -> list[str]:
    status = result["status"]
    label = {"kept": "KEPT", "rolled_back": "ROLLED BACK", "rejected": "REJECTED", "no_patch": "NO PATCH",
             "dry_run": "NOT APPLIED", "refused": "REFUSED"}.get(status, status.upper())
    lines = [f"repair: {label} - {result.get('reason') or ''}".rstrip(" -")]
    if result.get("files"):
        lines.append(f"  patch: {', '.join(result['files'])} (+{result.get('added', 0)} -{result.get('removed', 0)})")
    if result.get("diagnostic"):
        lines.append(f"  diagnostic synthesiser: {result['diagnostic']} (not a model result)")
    if result.get("tests"):
        lines += ["  " + line for line in _render_tests("tests after the patch", result["tests"])]
    return lines


def render(
    task: TaskRecord, memory: Memory, step: int, max_steps: int, *, last_action: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None, error: str | None = None, warnings: list[str] | None = None,
    outline_nodes: list[dict[str, Any]] | None = None, last_repair: dict[str, Any] | None = None,
    result_token_budget: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """Build (text, dict). ``outline_nodes`` is given on reset; ``last_action``/``result`` after a step.
    ``result_token_budget`` (``env.observation_token_budget``) caps the text of the error and result; the memory
    and step lines after it are always shown."""
    steps_left = max(0, max_steps - step)
    obs: dict[str, Any] = {
        "task_id": task.task_id, "repo": task.repo, "step": step, "max_steps": max_steps, "steps_left": steps_left,
        "issue": {"title": task.title, "text": issue_text(task)}, "last_action": last_action, "result": result,
        "error": error, "warnings": list(warnings or []), "last_repair": last_repair, **memory.to_dict(),
    }
    lines: list[str] = []
    if outline_nodes is not None:
        obs["outline"] = outline_nodes
        # The outline comes before the issue: a prompt cut to the model's budget keeps its end, and the issue
        # is what tells tasks of the same repository apart (the outline is the same for all of them).
        lines += [f"Task {task.task_id} in repository {task.repo}.", "", "Repository outline (packages and files):"]
        lines += [node_line(n) for n in outline_nodes]
        lines.append("")
        if task.title:
            lines.append(f"Issue: {task.title}")
        lines.append(obs["issue"]["text"])
    else:
        lines.append(f"[step {step}/{max_steps}]")
        body: list[str] = []
        if error:
            body.append(f"error: {error}")
        if result is not None and last_action is not None:
            body += _render_result(last_action["name"], result)
        if body:
            text = "\n".join(body)
            lines.append(text if result_token_budget is None else
                         clip_middle(text, result_token_budget * CHARS_PER_TOKEN))
    lines += [f"warning: {w}" for w in obs["warnings"]]
    mem = obs["memory"]
    lines.append("")
    lines.append(f"Memory M: {len(mem['nodes'])}/{mem['max']} node(s)"
                 + (f" [{', '.join(mem['nodes'])}]" if mem["nodes"] else "")
                 + f"; notes: {len(mem['notes'])}; working graph W: {obs['working']['nodes']} node(s).")
    lines.append(f"Steps left: {steps_left}. Reply with one action.")
    return "\n".join(lines), obs
