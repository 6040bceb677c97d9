"""First imports of heavy packages, one at a time per process.

Episodes run in threads (eval workers, rollouts, SFT demonstrations, the verl agent loop's sandbox slots). The
first ``from transformers import AutoTokenizer`` from several threads at once races inside transformers' lazy
module: the other threads can see the package in ``sys.modules`` before its ``__init__`` finished and get
``ImportError: cannot import name 'AutoTokenizer' from 'transformers'`` (issue 27: one task in three runs of a
6-task eval became an ``agent_error``; 8 threads in a fresh process failed 7 of 8). Every import of transformers,
torch, verl, TRL and swebench's parsers that can run in such a thread is made under :func:`import_lock`, one
process-wide re-entrant lock; :func:`import_once` does the same for a module named at run time.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import ContextManager

#: Held while a heavy package is imported from code that may run in several threads at once.
IMPORT_LOCK: ContextManager[object] = threading.RLock()


def import_lock() -> ContextManager[object]:
    """The process-wide import lock, to wrap ordinary import statements::

        with import_lock():
            from transformers import AutoTokenizer
    """
    return IMPORT_LOCK


def import_once(module: str) -> ModuleType:
    """``importlib.import_module(module)`` under :func:`import_lock` (an ImportError propagates, as ``import``)."""
    with import_lock():
        return importlib.import_module(module)
