"""verl's per-episode log noise, once per worker process: the Continuous Token builder fallback warning (a filter on
that logger, graph_planner/training/verl/compat.py) and the first-prompt cut to ``rollout.prompt_length``, which
goes through the project's cut (graph_planner/models/chat.py::cut_prompt) and warns on the first cut only."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

pytest.importorskip("verl")

from verl.utils.tokenizer import continuous_token_wiring  # noqa: E402

from graph_planner.training.verl import agent_loop, compat  # noqa: E402
from graph_planner.training.verl.agent_loop import GraphPlannerAgentLoop  # noqa: E402


@pytest.fixture
def fresh_filter(monkeypatch):
    """verl's wiring logger with no filter yet (the process may have passed its one warning already), then
    the project's filter installed as compat installs it; the logger's filters are restored afterwards."""
    logger = logging.getLogger(compat.CONTINUOUS_TOKEN_LOGGER)
    monkeypatch.setattr(logger, "filters", [])
    assert compat.quiet_builder_fallback() is True
    assert compat.quiet_builder_fallback() is False  # installed once however often compat runs
    return logger


def test_builder_fallback_warning_passes_once_other_messages_always(fresh_filter, caplog):
    assert logging.getLogger(compat.CONTINUOUS_TOKEN_LOGGER) is continuous_token_wiring.logger
    with caplog.at_level(logging.DEBUG, logger=compat.CONTINUOUS_TOKEN_LOGGER):
        for model_type in ("llama", "llama", "mistral", None):  # one per episode in verl's agent loops
            continuous_token_wiring.infer_continuous_token_model_family(hf_model_type=model_type)
        for _ in range(3):
            fresh_filter.warning("builder %s failed", "x")
            fresh_filter.info("Resolved Continuous Token builder family from config.json model_type=%r: %s", "a", 1)
    fallbacks = [r for r in caplog.records if r.getMessage().startswith(compat.BUILDER_FALLBACK)]
    assert len(fallbacks) == 1 and "'llama'" in fallbacks[0].getMessage()
    assert sum(r.getMessage() == "builder x failed" for r in caplog.records) == 3
    assert sum(r.getMessage().startswith("Resolved Continuous Token") for r in caplog.records) == 3


def test_compat_installs_the_filter_on_import():
    logger = logging.getLogger(compat.CONTINUOUS_TOKEN_LOGGER)
    assert any(isinstance(f, compat.OncePerProcess) and f.prefix == compat.BUILDER_FALLBACK for f in logger.filters)


class _Builder:
    """Stands in for verl's Continuous Token builder: the initial prompt is 20 tokens."""

    def build_initial_tokens(self, messages, **kwargs):
        return list(range(20))


def test_first_prompt_cut_is_the_projects_and_warns_once_per_process(monkeypatch, caplog):
    monkeypatch.setattr(agent_loop, "_FIRST_PROMPT_CUTS", 0)  # a fresh worker process

    async def episodes() -> list[list[int]]:
        out = []
        for _ in range(4):  # verl makes one loop per episode; its own ct_build_initial_tokens calls the cap
            loop = GraphPlannerAgentLoop.__new__(GraphPlannerAgentLoop)
            loop.loop = asyncio.get_running_loop()
            loop.continuous_token_builder = _Builder()
            loop.rollout_config = SimpleNamespace(prompt_length=8)
            out.append(await loop.ct_build_initial_tokens([{"role": "user", "content": "x"}]))
        return out

    with caplog.at_level(logging.DEBUG):
        prompts = asyncio.run(episodes())
    assert prompts == [list(range(12, 20))] * 4  # the last prompt_length tokens
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].name == "graph_planner.models.chat"
    assert "cut to its last 8" in warnings[0].getMessage()
    assert sum("cut to its last 8" in r.getMessage() for r in caplog.records) == 4  # the rest at debug
    assert agent_loop._FIRST_PROMPT_CUTS == 4
    assert agent_loop.cap_first_prompt(list(range(5)), 8) == list(range(5))  # under the budget: as it is
