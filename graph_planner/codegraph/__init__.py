"""Code graph of the task's repository (CodeFuse-CGM schema), built with tree-sitter, and the planner's queries."""

from graph_planner.codegraph.builder import apply_changes, build_graph
from graph_planner.codegraph.cache import GraphCache
from graph_planner.codegraph.graph import CodeGraph, UnknownNodeError, UpdateReport
from graph_planner.codegraph.linearize import count_tokens, linearize, to_cgm_payload
from graph_planner.codegraph.query import ExpandHit, FindHit, ReadResult, expand, find, node_or_error, read
from graph_planner.codegraph.schema import BUILDER_VERSION, Edge, EdgeKind, Node, NodeKind
from graph_planner.codegraph.sources import load_files_from_dir, load_files_from_sandbox

__all__ = [
    "BUILDER_VERSION", "CodeGraph", "Edge", "EdgeKind", "ExpandHit", "FindHit", "GraphCache", "Node", "NodeKind",
    "ReadResult", "UnknownNodeError", "UpdateReport", "apply_changes", "build_graph", "count_tokens", "expand", "find", "linearize",
    "load_files_from_dir", "load_files_from_sandbox", "node_or_error", "read", "to_cgm_payload",
]
