"""rLLM 0.2.x adapters: :class:`GraphPlannerRLLMAgent` (``BaseAgent``) and :class:`GraphPlannerRLLMEnv`
(``BaseEnv``), for users who install rLLM from git (it is not on PyPI).

:func:`register_with_rllm` adds both under ``graph_planner`` to rLLM's name mappings, so its trainer accepts
``rllm.agent.name=graph_planner rllm.env.name=graph_planner`` (with ``rllm.env.env_args.run_config_path=...``).
Without rLLM the classes still import and run, on local stand-ins of rLLM's bases
(:mod:`graph_planner.integrations.rllm.compat`).

Importing this package with rLLM importable also installs the toy model's chat parser into rLLM's parser choice
(:mod:`graph_planner.integrations.rllm.chat_parser`): in the driver and in every Ray worker that unpickles the
adapter classes (passing the classes, as rLLM allows, reaches workers; names registered in the driver do not).
"""

from __future__ import annotations

import importlib
import logging

from graph_planner.integrations.rllm.agent import GraphPlannerRLLMAgent
from graph_planner.integrations.rllm.chat_parser import install_toy_chat_parser
from graph_planner.integrations.rllm.compat import RLLM_AVAILABLE
from graph_planner.integrations.rllm.env import GraphPlannerRLLMEnv

log = logging.getLogger(__name__)

RLLM_NAME = "graph_planner"
MAPPINGS_MODULE = "rllm.trainer.env_agent_mappings"
RLLM_MISSING = (
    "rLLM is not importable. rLLM is not on PyPI: pip install -e from its git checkout (0.2.x), e.g. "
    "`git clone https://github.com/rllm-org/rllm && git -C rllm checkout v0.2.1.post1 && pip install -e ./rllm`, "
    "then call register_with_rllm() again"
)
#: rLLM 0.2.x looks names up in the *_MAPPING dicts; the *_CLASSES dicts they are filtered from get the entry too.
_TABLES = {"env": ("ENV_CLASS_MAPPING", "ENV_CLASSES"), "agent": ("AGENT_CLASS_MAPPING", "AGENT_CLASSES")}


def register_with_rllm(name: str = RLLM_NAME) -> list[str]:
    """Insert the adapters into rLLM's env/agent mappings under ``name``; returns the tables updated.

    Raises ImportError with install instructions when rLLM is absent, or when its mappings are not the 0.2.x
    ones (later rLLM versions removed the agent/env trainer path).
    """
    try:
        mappings = importlib.import_module(MAPPINGS_MODULE)
    except ImportError as exc:
        raise ImportError(f"{RLLM_MISSING} ({exc})") from exc
    classes = {"env": GraphPlannerRLLMEnv, "agent": GraphPlannerRLLMAgent}
    missing = [tables[0] for tables in _TABLES.values() if not isinstance(getattr(mappings, tables[0], None), dict)]
    if missing:
        raise ImportError(f"{MAPPINGS_MODULE} has no {' / '.join(missing)} dict: this rLLM is not 0.2.x (later "
                          "versions dropped the agent/env trainer); install rLLM v0.2.1.post1 from git")
    updated = []
    for kind, tables in _TABLES.items():
        for table in tables:
            target = getattr(mappings, table, None)
            if isinstance(target, dict):
                target[name] = classes[kind]
                updated.append(table)
    install_toy_chat_parser()
    if not RLLM_AVAILABLE:
        log.warning("graph_planner's rLLM adapters were imported before rLLM was importable, so they subclass local "
                    "stand-ins of BaseAgent/BaseEnv (same methods); import rLLM first to get rLLM's own bases")
    return updated


if RLLM_AVAILABLE:
    install_toy_chat_parser()

__all__ = ["RLLM_AVAILABLE", "RLLM_NAME", "GraphPlannerRLLMAgent", "GraphPlannerRLLMEnv", "register_with_rllm"]
