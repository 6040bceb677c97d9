"""Policies: issue-term extraction and the rule policy's phases; the model policy's parse-error handling
(rule fallback or invalid-action step, both counted) through the real env and sandbox; `--agent cgm`."""

from __future__ import annotations

import pytest

from graph_planner.agents.factory import make_policy
from graph_planner.agents.model_policy import ModelPolicy
from graph_planner.agents.rule_policy import RulePolicy, SynthesizerOnlyPolicy, issue_queries
from graph_planner.codegraph import GraphCache
from graph_planner.config.schema import RunConfig
from graph_planner.env.episode import run_episode
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.env.samples import load_sample_tasks, sample_task
from graph_planner.episode.actions import MemoryCommit, Submit
from graph_planner.episode.turns import Turn
from graph_planner.episode.wire import system_prompt
from graph_planner.models.chat import ChatResponse
from graph_planner.models.synthesizers import NoSynthesizer
from graph_planner.sandbox.factory import make_sandbox

ANY_NOTE = "code named by the issue and its neighbours"


class ScriptedChat:
    """Stands in for a planner MODEL (none can run here): answers with the given outputs in order and records
    the prompts it was sent."""

    supports_tools = True

    def __init__(self, outputs: list[str | dict]) -> None:
        self.outputs = list(outputs)
        self.calls: list[dict] = []

    def chat(self, messages, tools=None, sampling=None) -> ChatResponse:
        self.calls.append({"messages": messages, "tools": tools})
        out = self.outputs.pop(0)
        ids = list(range(len(self.calls) + 2))
        if isinstance(out, dict):
            return ChatResponse(text="", tool_calls=[out], prompt_tokens=10, completion_tokens=4,
                                response_token_ids=ids, response_logprobs=[-0.5] * len(ids))
        return ChatResponse(text=out, prompt_tokens=10, completion_tokens=4, response_token_ids=ids,
                            response_logprobs=[-0.5] * len(ids))


def test_issue_queries_name_the_code_an_issue_talks_about():
    task = sample_task("graphplanner-samples__textkit-7")
    assert issue_queries(task.problem_statement, task.title)[0] == "truncate"
    queries = issue_queries("`Config.get_int` raises on ' 42 ' while `get` works; see minicfg/config.py and "
                            "`APP_PORT`", "get_int() fails")
    assert queries[0] == "get_int" and "minicfg/config.py" in queries
    assert queries.index("APP_PORT") > queries.index("minicfg/config.py")
    assert "print" not in issue_queries("print(len(x)) shows 3")


@pytest.fixture(scope="module")
def sandbox_env(tmp_path_factory):
    task = sample_task("graphplanner-samples__textkit-11")
    config = RunConfig.model_validate({"env": {"format_penalty": 0.1}})
    box = make_sandbox(task, config, None, "test-agents-policies")
    box.start()
    env = PlannerEnv(task, box, config.env, synthesizer=NoSynthesizer(),
                     graph_cache=GraphCache(tmp_path_factory.mktemp("graphs")))
    yield task, env
    box.close()


def test_rule_policy_walks_find_expand_read_commit_repair_submit(sandbox_env):
    task, env = sandbox_env
    env.max_steps = 6  # the shared fixture env: each test sets its own budget
    trajectory = run_episode(task, env, RulePolicy())
    names = [t.action["name"] for t in trajectory.turns]
    assert names == ["explore_find", "explore_expand", "read", "memory_commit", "repair", "submit"]
    assert trajectory.turns[0].action["arguments"]["query"] == "escape_html"
    assert trajectory.turns[3].action["arguments"]["node_ids"][0] == "fn:textkit/escape.py::escape_html"
    assert trajectory.turns[4].action["arguments"]["target_node_ids"][0] == "fn:textkit/escape.py::escape_html"
    assert trajectory.termination_reason == "submitted" and not trajectory.resolved  # no synthesiser


def test_rule_policy_shortens_its_plan_when_steps_run_out():
    policy = RulePolicy()
    found = Turn([], "", {"name": "explore_find", "arguments": {"query": "f"}}, "",
                 info={"result": {"nodes": [{"id": "fn:a.py::f", "kind": "FUNCTION", "path": "a.py"}]}})
    obs = {"steps_left": 3, "memory": {"nodes": []}, "last_action": found.action, "result": found.info["result"]}
    assert policy.next_action(obs, [found]) == MemoryCommit(node_ids=["fn:a.py::f"], note=ANY_NOTE)
    obs = {"steps_left": 2, "memory": {"nodes": ["fn:a.py::f"]}, "issue": {"title": "f is wrong"}}
    assert policy.next_action(obs, [found]).name == "repair"
    assert policy.next_action({"steps_left": 1, "memory": {"nodes": []}}, [found]) == Submit()


def test_model_policy_parse_error_uses_rule_fallback_and_is_counted_scripted_model(sandbox_env):
    task, env = sandbox_env
    chat = ScriptedChat([
        "I will look for the escaping code.",  # not an action -> fallback
        {"id": "c1", "type": "function", "function": {"name": "read",
                                                      "arguments": '{"node_id": "fn:textkit/escape.py::escape_html"}'}},
        '{"name": "note", "arguments": {"text": "escape_html escapes twice"}}',
    ])
    policy = ModelPolicy(chat, history_turns=4, fallback=RulePolicy())
    env.max_steps = 3  # the shared fixture env: each test sets its own budget
    trajectory = run_episode(task, env, policy)
    first, second, third = trajectory.turns
    assert first.parse_error == "no-action" and first.used_fallback and first.action["name"] == "explore_find"
    assert first.reward == pytest.approx(-0.1)  # the format penalty applies even when the fallback acts
    assert second.parse_error is None and second.action["name"] == "read" and "def escape_html" in second.observation
    assert third.action == {"name": "note", "arguments": {"text": "escape_html escapes twice"}}
    assert trajectory.info["parse_errors"] == 1 and trajectory.info["fallbacks"] == 1
    assert trajectory.info["tokens"]["planner_prompt"] == 30
    assert first.response_token_ids and len(first.response_logprobs) == len(first.response_token_ids)
    messages = chat.calls[2]["messages"]
    assert messages[0]["content"] == system_prompt() and chat.calls[0]["tools"]
    assert messages[1]["content"].startswith("Task graphplanner-samples__textkit-11")
    assert messages[2] == {"role": "assistant", "content": "I will look for the escaping code."}
    # the tool call, in its canonical text form (arguments at their defaults omitted)
    assert messages[4]["content"] == '{"name": "read", "arguments": {"node_id": "fn:textkit/escape.py::escape_html"}}'
    assert messages[-1]["role"] == "user" and "def escape_html" in messages[-1]["content"]


def test_model_policy_without_fallback_makes_an_invalid_step_scripted_model(sandbox_env):
    task, env = sandbox_env
    chat = ScriptedChat(['{"name": "explore_find", "arguments": {"query": "x"}} {"name": "submit"}',
                         '{"name": "fly", "arguments": {}}', ("```json\n{\"name\": \"note\", \"arguments\": "
                         "{\"text\": \"ok\"}}\n```")])
    env.max_steps = 3  # the shared fixture env: each test sets its own budget
    trajectory = run_episode(task, env, ModelPolicy(chat, history_turns=1))
    assert [t.parse_error for t in trajectory.turns] == ["multiple-actions", "unknown-action", None]
    assert trajectory.turns[0].action is None and not trajectory.turns[0].used_fallback
    assert "invalid action (multiple-actions)" in trajectory.turns[0].observation
    assert trajectory.info["parse_error_codes"] == {"multiple-actions": 1, "unknown-action": 1}
    assert trajectory.info["invalid_actions"] == 2 and trajectory.info["fallbacks"] == 0
    assert "(1 earlier turn(s) omitted)" in chat.calls[2]["messages"][1]["content"]


def test_synthesizer_only_policy_commits_search_hits_then_repairs(sandbox_env):
    task, env = sandbox_env
    env.max_steps = 4  # the shared fixture env: each test sets its own budget
    trajectory = run_episode(task, env, SynthesizerOnlyPolicy())
    assert [t.action["name"] for t in trajectory.turns] == ["explore_find", "memory_commit", "repair", "submit"]
    assert trajectory.turns[2].info["repair"]["status"] == "no_patch"


def test_make_policy_follows_the_config_scripted_model():
    assert isinstance(make_policy(RunConfig.model_validate({"experiment": {"agent": "cgm"}})), SynthesizerOnlyPolicy)
    assert isinstance(make_policy(RunConfig.model_validate({"backends": {"planner_backend": "rule"}})), RulePolicy)
    config = RunConfig.model_validate({"env": {"use_rule_fallback": True}})
    policy = make_policy(config, chat=ScriptedChat([]))
    assert isinstance(policy, ModelPolicy) and isinstance(policy.fallback, RulePolicy)
    with pytest.raises(ValueError, match="planner_endpoint"):
        make_policy(RunConfig.model_validate({"backends": {"planner_backend": "openai"}}))


def test_every_sample_row_shape_loads_with_repo_trees():
    for shape in ("swebench", "r2e"):
        tasks = load_sample_tasks(shape)
        assert len(tasks) >= 8
        assert all(task.resolve_repo_path(".").is_dir() for task in tasks)
