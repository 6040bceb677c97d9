"""The per-repository task repository: one git repository holding, for every synthesised task, a root commit of the
buggy tree (the task's ``base_commit``). A root commit has no parent, so no history in the repository a sandbox
checks out holds the fix; the sandbox's history trim (sandbox/history.py) drops every other task's objects too.
The docker backend uses one image per task repository (``synth_image``), holding every task commit; a container
checks out its task's commit when it starts and trims the rest the same way.

Commits are made with git plumbing on a private index (hash-object, update-index, write-tree, commit-tree) with the
fixed identity and date of graph_planner.data.gitrepo, so the same bug in the same tree always gets the same id.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from graph_planner.data.gitrepo import GitError, deterministic_git_env
from graph_planner.data.record import SYNTH_IMAGE_PREFIX
from graph_planner.sandbox.images import TASK_REFS

_IGNORED = ("__pycache__", ".pytest_cache", ".git", "*.pyc", ".mypy_cache", ".ruff_cache")


def git(repo: Path, *args: str, data: bytes | None = None, index: Path | None = None) -> str:
    env = deterministic_git_env()
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    done = subprocess.run(["git", *args], cwd=repo, env=env, input=data, capture_output=True, check=False)
    if done.returncode != 0:
        raise GitError(f"`git {' '.join(args)}` failed in {repo}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode("utf-8", "surrogateescape")


def tracked_files(source: Path) -> list[str] | None:
    """Files git tracks in ``source`` (None when it is not a git work tree)."""
    if not (source / ".git").exists():
        return None
    listing = git(source, "ls-files", "-z")
    return [p for p in listing.split("\0") if p]


def synth_image(repo: str, commits: Iterable[str]) -> str:
    """The docker image every task of one task repository shares (`gp images build` makes one image of all its
    commits; images.TASK_REFS): named after the repository and the set of task commits it holds."""
    name = re.sub(r"[^a-z0-9._-]+", "-", repo.lower()).strip("-._") or "repo"
    digest = hashlib.sha256("\n".join(sorted(set(commits))).encode()).hexdigest()[:12]
    return f"{SYNTH_IMAGE_PREFIX}{name}:{digest}"


def copy_tree(source: Path, dest: Path) -> None:
    """The source's files without caches or history: tracked files of a git checkout, else the whole tree."""
    files = tracked_files(source)
    if files is None:
        shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns(*_IGNORED))
        return
    dest.mkdir(parents=True)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        src = source / rel
        if src.is_symlink():
            os.symlink(os.readlink(src), target)
        elif src.is_file():
            shutil.copy2(src, target)


class TaskRepo:
    """A fresh repository at ``path`` built from a copy of ``source``; ``add_task`` commits one buggy tree."""

    def __init__(self, source: Path, path: Path) -> None:
        self.path = path
        copy_tree(source, path)
        git(path, "init", "--quiet")
        git(path, "config", "core.autocrlf", "false")
        self._index = path / ".git" / "synth-index"
        git(path, "add", "-A", index=self._index)
        self.base_tree = git(path, "write-tree", index=self._index).strip()
        self.first_commit: str | None = None

    def add_task(self, rel_path: str, mutated: bytes, ref: str, message: str) -> str:
        """Commit the base tree with ``rel_path`` replaced by ``mutated`` as a root commit; returns its id."""
        mode = git(self.path, "ls-tree", self.base_tree, "--", rel_path, index=self._index).split(" ", 1)[0]
        blob = git(self.path, "hash-object", "-w", "--stdin", data=mutated).strip()
        git(self.path, "read-tree", self.base_tree, index=self._index)
        git(self.path, "update-index", "--cacheinfo", f"{mode or '100644'},{blob},{rel_path}", index=self._index)
        tree = git(self.path, "write-tree", index=self._index).strip()
        commit = git(self.path, "commit-tree", tree, "-m", message).strip()
        git(self.path, "update-ref", f"{TASK_REFS}{ref}", commit)
        self.first_commit = self.first_commit or commit
        return commit

    def reverse_diff(self, commit: str) -> str:
        """The gold patch: the task's buggy tree -> the clean tree (a/ b/ prefixes, `git apply` ready)."""
        return git(self.path, "diff-tree", "-p", "--no-color", "--no-ext-diff", "--full-index", commit,
                   self.base_tree)

    def finish(self) -> None:
        """Leave the work tree checked out at a task (never the clean tree) and drop the private index."""
        self._index.unlink(missing_ok=True)
        if self.first_commit is None:
            return
        git(self.path, "checkout", "--quiet", "--force", "--detach", self.first_commit)
        git(self.path, "clean", "-fdxq")
        git(self.path, "prune", "--expire=now")  # the clean tree's own objects: referenced by no task
