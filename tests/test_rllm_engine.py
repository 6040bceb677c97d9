"""rLLM's own engine (0.2.x ``AgentExecutionEngine``, ``engine_name="openai"``, with a tokenizer) drives Graph
Planner's rLLM agent and env through `gp serve`, as seed 002 describes: the engine templates each prompt with the
chat parser rLLM picks for the tokenizer (the toy's, installed by importing graph_planner.integrations.rllm),
calls `/v1/completions`, and parses the answer back into the agent's turn.

rLLM is not on PyPI, so this is skipped where it is not importable (the project venv, CI). It was run against the
real rLLM v0.2.1 source (see docs/seed_compatibility.md, "rLLM versions"). The toy's random weights write no valid
action, so every step takes the env's format penalty: this checks the plumbing; scripted correct actions resolving
through the same adapters are tests/test_integrations_rllm.py's contract tests.
"""

from __future__ import annotations

import asyncio

import pytest
from serve_fixtures import serving
from test_integrations_rllm import env_args, rllm_row  # noqa: F401 - rllm_row is a pytest fixture

engine_module = pytest.importorskip("rllm.engine.agent_execution_engine", reason="rLLM (0.2.x) is not importable")

from graph_planner.config.schema import RunConfig, SamplingConfig  # noqa: E402
from graph_planner.integrations.rllm import GraphPlannerRLLMAgent, GraphPlannerRLLMEnv  # noqa: E402
from graph_planner.integrations.rllm.chat_parser import toy_chat_parser_class  # noqa: E402
from graph_planner.models.chat import HFChatModel  # noqa: E402
from graph_planner.models.serve import create_app  # noqa: E402
from graph_planner.models.toy import resolve_model_path  # noqa: E402

#: The planner's first prompt is ~1,600 toy tokens: rLLM's default max_prompt_length (1024) refuses it, so the
#: engine gets the budget the docs give.
MAX_PROMPT = 4096
MAX_RESPONSE = 24


@pytest.fixture(scope="module")
def toy():
    path = resolve_model_path("toy", RunConfig().paths.cache_dir)
    return HFChatModel(path, sampling=SamplingConfig(do_sample=False, max_new_tokens=MAX_RESPONSE), seed=0)


def test_rllm_picks_the_toy_chat_parser_and_it_round_trips(toy):
    from rllm.parser import ChatTemplateParser

    parser = ChatTemplateParser.get_parser(toy.tokenizer)
    assert isinstance(parser, toy_chat_parser_class())
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a"}]
    assert parser.verify_equivalence(messages)  # one by one == together: rLLM's token masks rely on it
    ids = toy.tokenizer.encode("find the bug<|end|>", add_special_tokens=False)
    assert parser.parse_completion(ids)["content"] == "find the bug"


def test_rllm_agent_execution_engine_runs_episodes_through_gp_serve(tmp_path, rllm_row, toy):  # noqa: F811
    prepared_dir, row = rllm_row
    with serving(create_app(toy, "toy")) as url:
        engine = engine_module.AgentExecutionEngine(
            engine_name="openai", tokenizer=toy.tokenizer, agent_class=GraphPlannerRLLMAgent,
            env_class=GraphPlannerRLLMEnv, agent_args={},
            env_args=env_args(tmp_path, prepared_dir, "gold", max_steps=2),
            rollout_engine_args={"base_url": f"{url}/v1", "api_key": "unused", "model": "toy"},
            sampling_params={"temperature": 0.0}, max_prompt_length=MAX_PROMPT, max_response_length=MAX_RESPONSE,
            max_steps=2, n_parallel_agents=2, api_retries=1)
        trajectories = asyncio.run(engine.execute_tasks([row, row]))
    assert len(trajectories) == 2
    for trajectory in trajectories:
        assert trajectory.steps, "the engine ran no step"
        first = trajectory.steps[0]
        assert first.model_response  # the toy's text came back through /v1/completions and the toy parser
        assert first.chat_completions[0]["role"] == "system"
        assert isinstance(trajectory.reward, float)
        assert all(step.info for step in trajectory.steps)
