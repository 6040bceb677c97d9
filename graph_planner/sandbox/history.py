"""No future in a sandbox: after the repository is checked out at the task's base commit, everything that could
name a later commit is removed from `.git` (branches, tags, remotes, replace refs, stash, reflogs, FETCH_HEAD /
ORIG_HEAD, grafts, alternates) and the object store is repacked with only what the base commit reaches, so the fix
commit is unreachable *and absent* (`git log --all`, `git cat-file -e <fix>` and `git fsck --lost-found` find
nothing). Used by both shell backends: on the local copy (whose source may be a full clone) and inside the
container (prebuilt SWE-bench / R2E images keep upstream history)."""

from __future__ import annotations

import shlex

#: git settings for every command the sandbox itself runs: repository hooks, fsmonitor commands and pagers are
#: never executed on the sandbox's behalf (code run by a test could plant them in `.git/`).
SAFE_GIT_ENV = {
    "GIT_CONFIG_COUNT": "3",
    "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": "/dev/null",
    "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "false",
    "GIT_CONFIG_KEY_2": "core.pager", "GIT_CONFIG_VALUE_2": "cat",
    "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat",
}


def trim_history_script(base_commit: str) -> str:
    """Bash that leaves HEAD detached at ``base_commit`` with no object or name past it (run in the repo root).

    Idempotent; the repack costs about what a `git gc` of the base history costs (milliseconds for small repos)."""
    base = shlex.quote(base_commit)
    return "\n".join([
        "set -e",
        f"git checkout -q --detach {base}",
        # names: every ref (branches, tags, remotes, replace/*, stash, notes), then the files that hold commit ids
        "git for-each-ref --format='delete %(refname)' | git update-ref --no-deref --stdin",
        "for r in $(git remote); do git remote remove \"$r\"; done",
        "rm -rf .git/logs .git/FETCH_HEAD .git/ORIG_HEAD .git/MERGE_HEAD .git/CHERRY_PICK_HEAD "
        ".git/info/grafts .git/refs/original .git/rebase-merge .git/rebase-apply .git/worktrees "
        ".git/objects/info/commit-graph .git/objects/info/commit-graphs",
        # objects: only what the base commit reaches, in one pack; borrowed objects copied in, then no alternates.
        # The repack (seconds on a big repository) is skipped when every stored object is reachable already (an
        # image built by `gp images build` was trimmed at build time)
        "reach=$(git rev-list --objects HEAD | wc -l)",
        "stored=$(git count-objects -v | awk '/^(count|in-pack):/ {s += $2} END {print s + 0}')",
        "if [ \"$reach\" != \"$stored\" ] || [ -e .git/objects/info/alternates ]; then",
        "  git repack -a -d -q --no-write-bitmap-index",
        "  rm -f .git/objects/info/alternates",
        "  git prune --expire=now",
        "fi",
    ])
