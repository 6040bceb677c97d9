"""Carry out the grading guard (graph_planner.grading.guard) in a ShellSandbox: find the task's test files and every
pytest configuration file at any depth, compare them with the base commit in one round trip, and reset / remove
what the patch changed, before the hidden tests are installed and the graded command runs."""

from __future__ import annotations

import shlex
from typing import Any

from graph_planner.grading.guard import CONFIG_BASENAMES, TEST_MODULE_GLOBS, is_guarded, plan_guard, test_file_paths
from graph_planner.sandbox.base import SandboxError
from graph_planner.sandbox.patching import touched_files

_SEP = "\x01"


def _find_config_cmd() -> str:
    names = " -o ".join(f"-name {shlex.quote(n)}" for n in (*CONFIG_BASENAMES, *TEST_MODULE_GLOBS))
    # every depth, ignored and untracked files included (pytest reads them whatever git thinks); links too
    return f"find . -path ./.git -prune -o \\( {names} \\) \\( -type f -o -type l -o -type d \\) -print0"


def _ids_cmd(paths: list[str]) -> str:
    """Print `<id> <path>` NUL-terminated for each path: blob id of a regular file, `link`/`dir`/`other`."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    return (f"for p in {quoted}; do if [ -L \"$p\" ]; then i=link; elif [ -d \"$p\" ]; then i=dir; "
            "elif [ -f \"$p\" ]; then i=$(git hash-object -- \"$p\") || i=unreadable; elif [ -e \"$p\" ]; then "
            "i=other; else continue; fi; printf '%s %s\\0' \"$i\" \"$p\"; done")


def _parse_ids(text: str) -> dict[str, str]:
    out = {}
    for item in text.split("\x00"):
        if " " in item:
            blob, path = item.split(" ", 1)
            out[path.removeprefix("./")] = blob
    return out


class GuardRunner:
    """One sandbox's guard: the base side (task test files + base config files) is listed once and cached."""

    def __init__(self, sandbox: Any) -> None:
        """``sandbox``: a started ShellSandbox (typed Any: shell.py imports this module)."""
        self.sb = sandbox
        self._base_config: list[str] | None = None
        task = sandbox.task
        patch_files: list[str] = []
        if task.test_patch:
            patch_files = touched_files(task.test_patch)
        self.test_files = test_file_paths(task.fail_to_pass, task.pass_to_pass, task.test_files, patch_files)
        # the test_patch's new files are installed by the grading step itself, never by the patch
        self.test_files -= sandbox._hidden_files

    def _base_config_files(self) -> list[str]:
        if self._base_config is None:
            res = self.sb._git(f"ls-tree -r -z --name-only {self.sb.base_commit}", what="list the base tree")
            self._base_config = [p for p in res.stdout.split("\x00")
                                 if p and is_guarded(p)]
        return self._base_config

    def run(self) -> list[str]:
        """Reset / remove what the patch changed among guarded files; returns one note per action.

        Two round trips whatever the repository's size: git names the tracked paths that differ from the base
        (the tree was just snapshotted, so new files are in the index) and `find` names guarded files git
        ignores; only those, plus the task's test files, are hashed and compared."""
        sb = self.sb
        base = sb.base_commit
        base_guarded = set(self._base_config_files())
        first = sb._exec_raw(f"git -c core.quotepath=off diff --name-only -z --no-renames {base} --; "
                             f"printf '{_SEP}'; {_find_config_cmd()}", sb.settings.exec_timeout, None)
        changed_part, found_part = (first.stdout.split(_SEP) + [""])[:2]
        changed = {p for p in changed_part.split("\x00") if p and (is_guarded(p) or p in self.test_files)}
        found = {p.removeprefix("./") for p in found_part.split("\x00") if p}
        candidates = sorted(changed | (found - base_guarded) | self.test_files)
        if not candidates:
            return []
        quoted = " ".join(shlex.quote(p) for p in candidates)
        res = sb._exec_raw(f"git -c core.quotepath=off ls-tree -r -z {base} -- {quoted}; printf '{_SEP}'; "
                           f"{_ids_cmd(candidates)}", sb.settings.exec_timeout, None)
        base_part, current_part = (res.stdout.split(_SEP) + [""])[:2]
        base_ids: dict[str, str] = {}
        wanted = set(candidates)
        for entry in base_part.split("\x00"):
            meta, _, path = entry.partition("\t")
            fields = meta.split()
            if path in wanted and len(fields) == 3:
                mode, _kind, blob = fields
                base_ids[path] = blob if mode in ("100644", "100755") else ("link" if mode == "120000" else "other")
        current = _parse_ids(current_part)
        plan = plan_guard(base_ids, current, self.test_files, self._read_pair)
        if plan.remove:
            sb._exec_raw("rm -rf -- " + " ".join(shlex.quote(p) for p in plan.remove), sb.settings.exec_timeout, None)
        if plan.restore:
            paths = " ".join(shlex.quote(p) for p in plan.restore)
            res = sb._exec_raw(f"rm -rf -- {paths} && git checkout -q {base} -- {paths}", sb.settings.exec_timeout, None)
            if not res.ok:
                raise SandboxError(f"{sb.backend} sandbox {sb.where}: could not restore guarded files "
                                   f"{plan.restore}: {res.output.strip()[-600:]}")
        return plan.notes

    def _read_pair(self, path: str) -> tuple[bytes | None, bytes | None]:
        sb = self.sb
        quoted = shlex.quote(path)
        old = sb._exec_raw(f"git show {sb.base_commit}:{quoted}", sb.settings.exec_timeout, None)
        new = sb._exec_raw(f"[ -f {quoted} ] && [ ! -L {quoted} ] && cat -- {quoted}", sb.settings.exec_timeout, None)
        return (old.stdout.encode("utf-8", "surrogateescape") if old.ok else None,
                new.stdout.encode("utf-8", "surrogateescape") if new.ok else None)
