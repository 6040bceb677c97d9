"""Start slow imports a phase will need on a background thread, while the phase does other work.

On 2 cores a run spends most of its first rollout waiting on test runs in sandboxes; importing verl (~5 s,
it pulls in Ray) or swebench's log parsers (~1.6 s, they pull in modal) meanwhile takes them off the critical
path. The imports go through :func:`graph_planner.imports.import_once`: an episode thread's first import of the
same packages waits for the background one and gets the same module. A failed background import is only logged; the real
import where the module is used raises the error as before.
"""

from __future__ import annotations

import logging
import threading

from graph_planner.imports import import_once

log = logging.getLogger(__name__)

#: What the local GRPO trainer needs after its first rollout: verl's GRPO math and the test-log parsers.
GRPO_IMPORTS = ("verl.trainer.ppo.core_algos", "swebench.harness.log_parsers")
#: What the SFT warm start needs after collecting its demonstrations (which run tests: the parsers).
SFT_IMPORTS = ("trl", "swebench.harness.log_parsers")
#: What the demo's steps import (torch, transformers, TRL, verl's GRPO math, the parsers), started by
#: ``flows/demo.py`` while Prefect's ephemeral server starts in its own process and this one mostly waits.
DEMO_IMPORTS = ("torch", "transformers", "trl", "verl.trainer.ppo.core_algos", "swebench.harness.log_parsers")


def import_in_background(*modules: str) -> threading.Thread:
    """Import ``modules`` in order on a daemon thread; return the thread (join it to wait)."""

    def run() -> None:
        for name in modules:
            try:
                import_once(name)  # under the import lock: an episode thread may make its first import meanwhile
            except Exception as exc:  # noqa: BLE001 - the real import at the point of use reports it
                log.debug("background import of %s failed: %s", name, exc)

    thread = threading.Thread(target=run, name="background-imports", daemon=True)
    thread.start()
    return thread
