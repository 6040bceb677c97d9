"""Patch guard: refuse diffs that escape the repository, carry binary junk or are too large, before any backend
touches them; and list the files a unified diff touches (used for hidden-test detection)."""

from __future__ import annotations

import posixpath
import re

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from graph_planner.sandbox.base import PatchRejected

#: Default caps: a repair patch is source text, not a vendored tree.
MAX_PATCH_BYTES = 1_000_000
MAX_PATCH_FILES = 200

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
#: git modes a patch may not create, keep or change to: 120000 = symbolic link, 160000 = gitlink (submodule).
#: A link could point at /etc/passwd, a host directory or a hidden test; a gitlink at another repository.
_LINK_MODE = re.compile(r"^(?:(?:new|old|new file|deleted file) mode|index [0-9a-f]+\.\.[0-9a-f]+) (1[26]0000)\s*$",
                        re.MULTILINE)
_HEADER_PATHS = re.compile(r"^(?:diff --git |--- |\+\+\+ |rename from |rename to |copy from |copy to )(.*)$", re.MULTILINE)


def _strip_prefix(raw: str) -> str:
    """`a/x` / `b/x` → `x`; drop a trailing tab + timestamp as written by `diff -u`."""
    path = raw.split("\t", 1)[0].strip()
    if path.startswith('"') and path.endswith('"') and len(path) >= 2:
        path = path[1:-1]
    if path.startswith(("a/", "b/")):
        path = path[2:]
    return path


def unsafe_path_reason(path: str) -> str | None:
    """Why ``path`` may not be touched by a patch (None when it is a plain path inside the repo)."""
    if path == "/dev/null":
        return None
    if not path:
        return "empty path"
    if path.startswith(("/", "~")) or re.match(r"^[A-Za-z]:[\\/]", path):
        return "absolute path"
    if "\\" in path:
        return "backslash in path"
    parts = path.split("/")
    if ".." in parts:
        return "'..' escapes the repository"
    if ".git" in parts:
        return "touches the .git directory"
    if posixpath.normpath(path).startswith("../"):
        return "escapes the repository"
    return None


def _raw_header_paths(diff: str) -> list[str]:
    """Every path named in a header line, checked before unidiff (which may silently normalise them)."""
    paths: list[str] = []
    for match in _HEADER_PATHS.finditer(diff):
        line = match.group(0)
        rest = match.group(1)
        if line.startswith("diff --git "):
            # "diff --git a/x b/x": split on " b/" is ambiguous with spaces; take both halves when possible.
            halves = rest.split(" b/", 1) if " b/" in rest else rest.split(" ", 1)
            paths.extend(_strip_prefix(h if i == 0 else "b/" + h) for i, h in enumerate(halves))
        else:
            paths.append(_strip_prefix(rest))
    return paths


def touched_files(diff: str) -> list[str]:
    """Repository-relative paths a unified diff creates, modifies, deletes or renames (sources and targets)."""
    try:
        patch = PatchSet(diff)
    except UnidiffParseError as exc:
        raise PatchRejected(f"patch is not a valid unified diff: {exc}") from None
    paths: list[str] = []
    for pf in patch:
        for raw in (pf.source_file, pf.target_file):
            if raw is None:
                continue
            path = _strip_prefix(raw)
            if path != "/dev/null" and path not in paths:
                paths.append(path)
    return paths


def check_patch(diff: str, max_bytes: int = MAX_PATCH_BYTES, max_files: int = MAX_PATCH_FILES) -> list[str]:
    """Validate a unified diff and return the files it touches; raise PatchRejected saying what is wrong."""
    if not diff or not diff.strip():
        raise PatchRejected("patch is empty")
    size = len(diff.encode("utf-8", errors="surrogateescape"))
    if size > max_bytes:
        raise PatchRejected(f"patch is {size} bytes, over the {max_bytes}-byte limit; send a smaller edit")
    if "\x00" in diff:
        raise PatchRejected("patch contains NUL bytes (binary junk); only text diffs are accepted")
    if "GIT binary patch" in diff or re.search(r"^Binary files .* differ$", diff, re.MULTILINE):
        raise PatchRejected("binary patches are not accepted; send a text diff")
    link = _LINK_MODE.search(diff)
    if link:
        line_no = diff.count("\n", 0, link.start()) + 1
        kind = "symbolic link" if link.group(1) == "120000" else "submodule (gitlink)"
        raise PatchRejected(f"patch line {line_no} ({link.group(0).strip()!r}) creates or changes a {kind}; "
                            "links are not accepted in patches (they could point outside the repository)")
    bad = _CONTROL.search(diff)
    if bad:
        line_no = diff.count("\n", 0, bad.start()) + 1
        raise PatchRejected(f"patch line {line_no} contains control character {bad.group(0)!r} (binary junk)")
    for path in _raw_header_paths(diff):
        reason = unsafe_path_reason(path)
        if reason:
            raise PatchRejected(f"patch touches {path!r}: {reason}; paths must be relative to the repository root")
    files = touched_files(diff)
    if not files:
        raise PatchRejected("patch names no file (expected '--- a/<path>' / '+++ b/<path>' headers)")
    for path in files:
        reason = unsafe_path_reason(path)
        if reason:
            raise PatchRejected(f"patch touches {path!r}: {reason}; paths must be relative to the repository root")
    if len(files) > max_files:
        raise PatchRejected(f"patch touches {len(files)} files, over the limit of {max_files}")
    return files


def created_files(diff: str) -> list[str]:
    """Files a diff adds (source /dev/null): for a SWE-bench test_patch these are the hidden new test files."""
    try:
        patch = PatchSet(diff)
    except UnidiffParseError as exc:
        raise PatchRejected(f"patch is not a valid unified diff: {exc}") from None
    return [_strip_prefix(pf.target_file) for pf in patch if pf.is_added_file]
