"""Where a unified diff changes its files, as old-side line numbers: the gold-site rule shared by the oracle
synthesiser (models/oracle.py) and the localisation metrics (env/localisation.py).

Rule: every removed line of every hunk; for lines a hunk only adds, the old line the addition follows (line 1
for an addition at the top of a file). Context lines are not changes. New files (``--- /dev/null``) have no old
lines and are skipped: no existing code could be found for them.
"""

from __future__ import annotations

import re

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def gold_sites(patch: str) -> dict[str, list[int]]:
    """``{path: [old-side line numbers the patch changes]}`` of a unified diff (rule in the module docstring).

    Hunks are read by their line counts, so a removed line that itself starts with ``--`` is not a header.
    """
    sites: dict[str, set[int]] = {}
    path: str | None = None
    old_line = old_left = new_left = 0
    for raw in patch.splitlines():
        if old_left > 0 or new_left > 0:  # inside a hunk
            tag = raw[:1]
            if tag == "\\":  # "\ No newline at end of file"
                continue
            if tag == "-":
                if path is not None:
                    sites.setdefault(path, set()).add(old_line)
                old_line, old_left = old_line + 1, old_left - 1
            elif tag == "+":
                if path is not None:
                    sites.setdefault(path, set()).add(max(1, old_line - 1))
                new_left -= 1
            else:  # context (a blank line is an empty context line)
                old_line, old_left, new_left = old_line + 1, old_left - 1, new_left - 1
            continue
        if raw.startswith("--- "):
            src = raw[4:].split("\t", 1)[0].strip()
            path = None if src == "/dev/null" else (src[2:] if src.startswith("a/") else src)
            continue
        match = _HUNK.match(raw)
        if match:
            old_line = int(match.group(1))
            old_left = int(match.group(2)) if match.group(2) is not None else 1
            new_left = int(match.group(4)) if match.group(4) is not None else 1
            if old_left == 0:  # "@@ -N,0 +...": the addition follows old line N
                old_line += 1
    return {p: sorted(lines) for p, lines in sites.items()}
