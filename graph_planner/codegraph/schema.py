"""Code-graph vocabulary (CodeFuse-CGM schema): node/edge kinds, Node/Edge records and the node-id format.

Node ids are stable, human-readable strings the planner can type back (`fn:pkg/mod.py::Class.method`), so the
LLM sees and uses the same ids the graph stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

#: Bumped whenever the builder's output changes; part of the graph cache key.
BUILDER_VERSION = "cgm-ts-1"


class NodeKind(str, Enum):
    REPO = "REPO"
    PACKAGE = "PACKAGE"
    FILE = "FILE"
    TEXTFILE = "TEXTFILE"
    CLASS = "CLASS"
    FUNCTION = "FUNCTION"
    ATTRIBUTE = "ATTRIBUTE"


class EdgeKind(str, Enum):
    CONTAINS = "contains"
    IMPORTS = "imports"
    EXTENDS = "extends"
    CALLS = "calls"


#: nodeType strings of CodeFuse-CGM's serialised graphs.
CGM_NODE_TYPE = {
    NodeKind.REPO: "Repo",
    NodeKind.PACKAGE: "Package",
    NodeKind.FILE: "File",
    NodeKind.TEXTFILE: "TextFile",
    NodeKind.CLASS: "Class",
    NodeKind.FUNCTION: "Function",
    NodeKind.ATTRIBUTE: "Attribute",
}

_PREFIX = {NodeKind.CLASS: "cls", NodeKind.FUNCTION: "fn", NodeKind.ATTRIBUTE: "attr"}
REPO_ID = "repo"


def file_id(path: str) -> str:
    return f"file:{path}"


def package_id(directory: str) -> str:
    return f"pkg:{directory}"


def symbol_id(kind: NodeKind, path: str, qualname: str) -> str:
    return f"{_PREFIX[kind]}:{path}::{qualname}"


@dataclass(slots=True)
class Node:
    """One graph node; lines are 1-based and inclusive (0 for nodes without a span: REPO, PACKAGE)."""

    id: str
    kind: NodeKind
    name: str
    qualname: str
    path: str
    start_line: int = 0
    end_line: int = 0
    signature: str = ""
    doc_head: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind.value, "name": self.name, "qualname": self.qualname,
                "path": self.path, "start_line": self.start_line, "end_line": self.end_line,
                "signature": self.signature, "doc_head": self.doc_head}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        return cls(id=data["id"], kind=NodeKind(data["kind"]), name=data["name"], qualname=data["qualname"],
                   path=data["path"], start_line=data["start_line"], end_line=data["end_line"],
                   signature=data.get("signature", ""), doc_head=data.get("doc_head", ""))


class Edge(NamedTuple):
    """A directed edge. When `resolved` is False, `dst` is the name as written in the code (no such node).

    A NamedTuple, not a dataclass: graphs hold hundreds of thousands of edges and hash them in indexes, and
    tuple hashing runs in C.
    """

    src: str
    dst: str
    kind: EdgeKind
    resolved: bool = True

    def to_list(self) -> list[Any]:
        return [self.src, self.dst, self.kind.value, self.resolved]

    @classmethod
    def from_list(cls, row: list[Any]) -> Edge:
        return cls(row[0], row[1], EdgeKind(row[2]), bool(row[3]))
