"""Read a repository's files for the graph builder: from the task's sandbox in one archive copy, or from a dir.

Never one command per file: a docker sandbox hands over a tar of its workdir, any other sandbox runs one
`git ls-files | tar | base64` command. Hidden test dirs, VCS/tool dirs, binary and large files are skipped.
"""

from __future__ import annotations

import base64
import io
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from graph_planner.sandbox.base import Sandbox, SandboxError

MAX_FILE_BYTES = 1_000_000
#: Directory names never read: hidden tests (R2E), VCS and tool caches.
SKIP_DIRS = frozenset({"r2e_tests", ".git", ".hg", ".svn", "__pycache__", ".tox", ".nox", ".venv", "venv",
                       "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs"})

# One command: list the files git knows (or every file when the dir is not a git work tree), tar them and print
# base64 (exec results are text). Hidden test names are not mentioned: sandboxes refuse commands that do.
TREE_ARCHIVE_COMMAND = (
    "{ git ls-files -z --cached --others --exclude-standard 2>/dev/null "
    "|| find . -type f ! -path './.git/*' -print0; } "
    "| tar --null --ignore-failed-read --no-recursion -T - -cf - 2>/dev/null | base64 -w0"
)


def keep_path(path: str) -> bool:
    parts = path.split("/")
    return not any(part in SKIP_DIRS or part.endswith(".egg-info") for part in parts[:-1]) and parts[-1] != ""


def _is_text(data: bytes) -> bool:
    return b"\0" not in data[:8192]


def files_from_tar(archive: bytes | io.BufferedIOBase) -> dict[str, bytes]:
    """Text files of a tar archive, by repo-relative path.

    A tar of a directory (docker's `get_archive('/testbed')`) starts with that directory's own entry; it is
    stripped so paths are relative to the repo root, like `git ls-files` paths.
    """
    fileobj = io.BytesIO(archive) if isinstance(archive, (bytes, bytearray)) else archive
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=fileobj, mode="r:*") as tar:
        members = tar.getmembers()
        prefix = ""
        if members and members[0].isdir():
            top = members[0].name.rstrip("/") + "/"
            if all(m.name == members[0].name or m.name.startswith(top) for m in members):
                prefix = top
        for member in members:
            if not member.isfile() or member.size > MAX_FILE_BYTES:
                continue
            path = member.name[len(prefix):] if prefix else member.name
            path = path.removeprefix("./")
            if not keep_path(path):
                continue
            handle = tar.extractfile(member)
            if handle is None:
                continue
            data = handle.read()
            if _is_text(data):
                out[path] = data
    return out


def _archive_bytes(raw: Any) -> bytes:
    """Accept what a sandbox's `_get_tree_archive()` may return: bytes, (stream, stat) or an iterable of chunks."""
    if isinstance(raw, tuple):
        raw = raw[0]
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw)
    if hasattr(raw, "read"):
        return raw.read()
    if isinstance(raw, Iterable):
        return b"".join(raw)
    raise TypeError(f"_get_tree_archive() returned {type(raw).__name__}; expected tar bytes or chunks")


def load_files_from_sandbox(sandbox: Sandbox, timeout: float = 300.0) -> dict[str, bytes]:
    """The task's files as the agent sees them (never the host's), in one archive copy."""
    getter = getattr(sandbox, "_get_tree_archive", None)
    if callable(getter):
        files = files_from_tar(_archive_bytes(getter()))
    else:
        result = sandbox.exec(TREE_ARCHIVE_COMMAND, timeout=timeout)
        if not result.ok or not result.stdout.strip():
            raise SandboxError(
                f"could not archive the repository in {type(sandbox).__name__} (rc={result.rc}, "
                f"timed_out={result.timed_out}) with `{TREE_ARCHIVE_COMMAND}`: {result.stderr.strip()[:500]}. "
                "The sandbox needs tar, base64 and find (or git) on PATH.")
        files = files_from_tar(base64.b64decode(result.stdout.strip()))
    is_hidden = getattr(sandbox, "is_hidden_path", None)
    if callable(is_hidden):  # belt and braces: hidden tests never reach the graph the agent explores
        files = {path: data for path, data in files.items() if not is_hidden(path)}
    return files


def load_files_from_dir(root: str | Path) -> dict[str, bytes]:
    """Text files under `root` (relative posix paths), with the same filters as the sandbox loader."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"cannot build a code graph from {root}: not a directory")
    out: dict[str, bytes] = {}
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for filename in filenames:
            full = Path(directory, filename)
            if full.is_symlink() or not full.is_file() or full.stat().st_size > MAX_FILE_BYTES:
                continue
            data = full.read_bytes()
            if _is_text(data):
                out[full.relative_to(root).as_posix()] = data
    return out
