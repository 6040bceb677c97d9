"""Deterministic git commits of plain source trees.

The bundled sample tasks ship as plain directories. Their ``base_commit`` is the commit that
``init_deterministic_repo`` makes of the tree: fixed identity, fixed date, no user or system git config,
so the same files give the same hash on every machine. The local sandbox calls the same function on its
working copy, which makes the sandbox's HEAD equal to the task's ``base_commit``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: Identity and date of every deterministic commit (they are part of the commit hash).
COMMIT_NAME = "Graph Planner Samples"
COMMIT_EMAIL = "samples@graph-planner.invalid"
COMMIT_DATE = "2025-01-01T00:00:00Z"
BASE_MESSAGE = "base"


class GitError(RuntimeError):
    """A git command failed; the message names the command, the directory and git's own error text."""


def deterministic_git_env() -> dict[str, str]:
    """Environment for git with the fixed identity and date, ignoring the user's and the system's config.

    User config could change the result (``core.autocrlf``, commit signing, hooks via ``init.templateDir``,
    ``diff.noprefix``), so only the repository's own config is read.
    """
    env = dict(os.environ)
    env.update(
        GIT_AUTHOR_NAME=COMMIT_NAME,
        GIT_AUTHOR_EMAIL=COMMIT_EMAIL,
        GIT_AUTHOR_DATE=COMMIT_DATE,
        GIT_COMMITTER_NAME=COMMIT_NAME,
        GIT_COMMITTER_EMAIL=COMMIT_EMAIL,
        GIT_COMMITTER_DATE=COMMIT_DATE,
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
    )
    return env


def run_git(repo: str | Path, *args: str, input_text: str | None = None) -> str:
    """Run ``git <args>`` in ``repo`` with the deterministic environment; return stdout or raise GitError."""
    command = ["git", *args]
    try:
        completed = subprocess.run(
            command,
            cwd=repo,
            env=deterministic_git_env(),
            input=input_text,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH; install git to build or run sample tasks") from None
    if completed.returncode != 0:
        raise GitError(
            f"`{' '.join(command)}` failed in {repo} (exit {completed.returncode}): "
            f"{completed.stderr.strip() or completed.stdout.strip()}"
        )
    return completed.stdout


def head_commit(repo: str | Path) -> str:
    """Full hash of HEAD in ``repo``."""
    return run_git(repo, "rev-parse", "HEAD").strip()


def commit_all(repo: str | Path, message: str) -> str:
    """Stage everything (honouring .gitignore) and commit it with the fixed identity; return the new HEAD.

    The same parent, tree and message always give the same hash.
    """
    run_git(repo, "add", "-A")
    run_git(repo, "-c", "commit.gpgsign=false", "commit", "--quiet", "--allow-empty", "--no-verify", "-m", message)
    return head_commit(repo)


def init_deterministic_repo(path: str | Path, message: str = BASE_MESSAGE) -> str:
    """Create ``.git`` in ``path`` (in place), commit the whole tree deterministically and return HEAD.

    Refuses a directory that already is a repository: committing on top of existing history would not
    reproduce the task's ``base_commit``.
    """
    repo = Path(path)
    if not repo.is_dir():
        raise GitError(f"cannot create a repository in {repo}: not a directory")
    if (repo / ".git").exists():
        raise GitError(f"{repo} already has a .git; init_deterministic_repo needs a plain source tree (copy it first)")
    run_git(repo, "init", "--quiet")
    # Keep the working tree's bytes as they are whatever the platform: they are hashed.
    run_git(repo, "config", "core.autocrlf", "false")
    run_git(repo, "config", "core.fileMode", "true")
    return commit_all(repo, message)


def apply_patch(repo: str | Path, patch: str, *, reverse: bool = False) -> None:
    """``git apply`` a unified diff (a/ b/ prefixes) to the working tree of ``repo``; GitError if it does not apply."""
    if not patch.strip():
        return
    args = ["apply", "--whitespace=nowarn"]
    if reverse:
        args.append("--reverse")
    run_git(repo, *args, "-", input_text=patch)


def staged_diff(repo: str | Path, *paths: str) -> str:
    """Unified diff of everything in the working tree against HEAD (new files included), limited to ``paths``."""
    run_git(repo, "add", "-A")
    diff = run_git(repo, "diff", "--cached", "--no-color", "--no-ext-diff", "HEAD", "--", *paths)
    run_git(repo, "reset", "--quiet")
    return diff
