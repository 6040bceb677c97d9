"""`gp graph`: build a code graph and run the planner's own queries (find / expand / read) on it from a shell.

The graph is the one the planner sees (same builder, same ranking, same node ids), so a researcher can check what an
`explore_find` or `read` action would show for a task. It lives in env/ because `--task` starts the task's sandbox
(at its base commit) to read the files, exactly as an episode does.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from graph_planner.codegraph import CodeGraph, UnknownNodeError, build_graph, expand, find, load_files_from_dir, read

graph_app = typer.Typer(
    help="Build a repository's code graph (CGM schema) and query it as the planner does.\n\n"
         "Examples:\n\n"
         "  gp graph build datasets/sample/repos/calc --out calc.graph.json\n\n"
         "  gp graph find datasets/sample/repos/calc 'add numbers'\n\n"
         "  gp graph expand --graph calc.graph.json fn:calc/ops.py::add --hop 2\n\n"
         "  gp graph read --task calc-1 fn:calc/ops.py::add",
    no_args_is_help=True)
console = Console()

RepoPath = Annotated[Path | None, typer.Argument(help="Repository directory to build the graph from.",
                                                  show_default=False)]
GraphFile = Annotated[Path | None, typer.Option("--graph", "-g", help="A graph JSON written by `gp graph build --out`.",
                                                show_default=False)]
TaskId = Annotated[str | None, typer.Option("--task", "-t", help="Build from this task's sandbox at its base commit.",
                                            show_default=False)]
DatasetFile = Annotated[str | None, typer.Option("--dataset", "-d", help="TaskRecord JSONL for --task (default: "
                                                 "the bundled samples).", show_default=False)]


def load_graph(repo: Path | None, graph_file: Path | None = None, task_id: str | None = None,
               dataset: str | None = None) -> CodeGraph:
    """The graph from exactly one source: a saved JSON, a directory, or a task's sandbox."""
    given = [name for name, value in (("REPO_PATH", repo), ("--graph", graph_file), ("--task", task_id)) if value]
    if len(given) != 1:
        raise typer.BadParameter(f"give exactly one of REPO_PATH, --graph, --task (got {', '.join(given) or 'none'})")
    if graph_file is not None:
        if not graph_file.is_file():
            raise typer.BadParameter(f"no graph file {graph_file}")
        return CodeGraph.from_json(json.loads(graph_file.read_text(encoding="utf-8")))
    if repo is not None:
        if not repo.is_dir():
            raise typer.BadParameter(f"{repo} is not a directory")
        return build_graph(load_files_from_dir(repo), repo=repo.resolve().name)
    return _graph_of_task(task_id or "", dataset)


def _graph_of_task(task_id: str, dataset: str | None) -> CodeGraph:
    from graph_planner.codegraph import load_files_from_sandbox
    from graph_planner.config.loader import load_run_config
    from graph_planner.env.commands import load_task
    from graph_planner.sandbox.factory import make_sandbox

    try:
        task, dataset_dir = load_task(task_id, dataset, "swebench")
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0])) from None
    config = load_run_config(write=False)
    with make_sandbox(task, config, dataset_dir) as sandbox:
        files = load_files_from_sandbox(sandbox)
    return build_graph(files, repo=task.repo, commit=task.base_commit)


def _fail(message: str) -> typer.Exit:
    Console(stderr=True).print(f"[red]{message}[/red]")
    return typer.Exit(1)


@graph_app.command("build")
def build_cmd(repo: RepoPath = None, task: TaskId = None, dataset: DatasetFile = None,
              out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the graph JSON here.",
                                                       show_default=False)] = None) -> None:
    """Build the graph and print node and edge counts by kind (and save it with --out)."""
    start = time.perf_counter()
    graph = load_graph(repo, None, task, dataset)
    seconds = time.perf_counter() - start
    nodes = Counter(node.kind.value for node in graph.nodes.values())
    edges = Counter(edge.kind.value for edge in graph.edges())
    table = Table(title=f"{graph.repo} @ {graph.commit or 'working tree'}: built in {seconds:.2f} s")
    table.add_column("kind")
    table.add_column("count", justify="right")
    for kind, count in sorted(nodes.items()):
        table.add_row(f"node {kind}", str(count))
    for kind, count in sorted(edges.items()):
        table.add_row(f"edge {kind}", str(count))
    console.print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(graph.to_json()), encoding="utf-8")
        console.print(f"graph: {out}")


@graph_app.command("find")
def find_cmd(query: Annotated[str, typer.Argument(help="Words, identifiers or path:GLOB, as in explore_find.")],
             repo: RepoPath = None, graph_file: GraphFile = None, task: TaskId = None, dataset: DatasetFile = None,
             limit: Annotated[int, typer.Option(help="Hits to show.")] = 20) -> None:
    """Rank nodes for a query with the planner's explore_find."""
    graph = load_graph(repo, graph_file, task, dataset)
    # plain lines, not a table: node ids must stay whole so they can be pasted into expand/read
    typer.echo(f"# find {query!r} in {graph.repo}: score  kind  node id  [lines]  why")
    for hit in find(graph, query, limit=limit):
        typer.echo(f"{hit.score:6.2f}  {hit.node.kind.value:<9}  {hit.node.id}  "
                   f"[{hit.node.start_line}-{hit.node.end_line}]  {', '.join(hit.reasons)}")


@graph_app.command("expand")
def expand_cmd(node_id: Annotated[str, typer.Argument(help="A node id (as find prints it).")],
               repo: RepoPath = None, graph_file: GraphFile = None, task: TaskId = None,
               dataset: DatasetFile = None, hop: Annotated[int, typer.Option(help="Edges to follow.")] = 1,
               limit: Annotated[int, typer.Option(help="Neighbours to show.")] = 20) -> None:
    """Neighbours of a node within --hop edges, ranked as explore_expand ranks them."""
    graph = load_graph(repo, graph_file, task, dataset)
    try:
        hits = expand(graph, node_id, hop=hop, limit=limit)
    except UnknownNodeError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"# expand {node_id} (hop {hop}): score  kind  edge  hop  node id")
    for hit in hits:
        arrow = f"{hit.edge.value}{'->' if hit.direction == 'out' else '<-'}"
        typer.echo(f"{hit.score:6.2f}  {hit.node.kind.value:<9}  {arrow:<11}  {hit.hop}  {hit.node.id}")


@graph_app.command("read")
def read_cmd(node_id: Annotated[str, typer.Argument(help="A node id (as find prints it).")],
             repo: RepoPath = None, graph_file: GraphFile = None, task: TaskId = None, dataset: DatasetFile = None,
             context: Annotated[int, typer.Option(help="Lines of context around the node.")] = 0) -> None:
    """The node's code, numbered, as the planner's read action shows it."""
    graph = load_graph(repo, graph_file, task, dataset)
    try:
        result = read(graph, node_id, context_lines=context)
    except UnknownNodeError as exc:
        raise _fail(str(exc)) from None
    console.print(f"[bold]{result.path}[/bold] lines {result.start_line}-{result.end_line}", highlight=False)
    typer.echo(result.text)
