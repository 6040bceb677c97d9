"""Which lines of the repository the clean test suite executes, measured once per repository in its sandbox.

A bug on a line no test runs can fail no test: such candidates are dropped before validation (each would cost a
full test run to learn nothing). The tracer is a few lines of ``sys.settrace`` that only records frames of files
under the repository (``coverage`` is not a dependency); its result comes back on stdout after a marker line. When
the traced run fails for any reason the filter is simply off.
"""

from __future__ import annotations

import json
import shlex

from graph_planner.sandbox.local import LocalSandbox

MARKER = "@@GP_SYNTH_EXECUTED_LINES@@"
_SCRIPT = f"""
import json, os, sys, threading
import pytest
root = os.getcwd()
hits = {{}}
def tracer(frame, event, arg):
    name = frame.f_code.co_filename
    if name.startswith("<"):
        return None
    path = name if os.path.isabs(name) else os.path.join(root, name)
    if not path.startswith(root + os.sep):
        return None
    lines = hits.setdefault(os.path.relpath(path, root), set())
    lines.add(frame.f_lineno)
    def local(frame, event, arg):
        if event == "line":
            lines.add(frame.f_lineno)
        return local
    return local
threading.settrace(tracer)
sys.settrace(tracer)
try:
    pytest.main(["-q", "-p", "no:cacheprovider"])
finally:
    sys.settrace(None)
print("\\n{MARKER}" + json.dumps({{k: sorted(v) for k, v in hits.items()}}))
"""


def executed_lines(box: LocalSandbox, timeout: float) -> dict[str, set[int]] | None:
    """repo-relative path -> executed line numbers, or None when the traced run gave no result."""
    result = box.exec(f"python -c {shlex.quote(_SCRIPT)}", timeout=timeout)
    _, found, payload = result.stdout.rpartition(MARKER)
    if not found:
        return None
    try:
        data = json.loads(payload.strip().splitlines()[0])
    except (ValueError, IndexError):
        return None
    return {path: set(lines) for path, lines in data.items()}
