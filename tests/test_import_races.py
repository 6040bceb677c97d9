"""The first import of transformers from many episode threads at once (graph_planner/imports.py).

Each case is a fresh process (the race is in the *first* import) whose threads all build an HFChatModel at the same
moment, the path `gp eval`'s synthesiser and the rollouts take. With the import lock stubbed out
(``python -c "$CHILD" stubbed 16``) the same processes fail: 6 of 6 did here, 13-15 of 16 threads each in 5 of them,
with `ImportError: cannot import name 'AutoTokenizer' from 'transformers'`. That run is not part of the suite (a
race; it costs minutes of imports on a loaded CI machine).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THREADS = 16
PROCESSES = 2

CHILD = """
import contextlib, sys, threading
from graph_planner import imports
if sys.argv[1] == "stubbed":
    imports.IMPORT_LOCK = contextlib.nullcontext()
from graph_planner.models.chat import HFChatModel

class Model:  # the weights are not what races; the imports in HFChatModel.__init__ are
    def eval(self):
        return self

n = int(sys.argv[2])
barrier, errors = threading.Barrier(n), []

def build():
    barrier.wait()
    try:
        HFChatModel("unused", model=Model(), tokenizer=object())
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")

threads = [threading.Thread(target=build) for _ in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"{len(errors)} failed", errors[:1])
"""


def run_processes(mode: str) -> list[str]:
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, mode, str(THREADS)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(PROCESSES)]
    return [p.communicate(timeout=300)[0].strip().splitlines()[-1] for p in procs]


@pytest.mark.slow
def test_many_threads_making_the_first_transformers_import_at_once_all_succeed():
    results = run_processes("locked")
    assert all(line.startswith("0 failed") for line in results), results
