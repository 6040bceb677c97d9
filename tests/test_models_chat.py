"""Chat clients and `gp serve`: the OpenAI-compatible client against a real server on loopback (the toy
checkpoint served by graph_planner.models.serve), retries / auth / payload with an httpx mock transport, and the
local HF chat model's token ids and log-probs."""

from __future__ import annotations

import json
import math

import httpx
import pytest
from serve_fixtures import serving

from graph_planner.config.schema import CGMGenerationConfig, RunConfig, SamplingConfig
from graph_planner.episode.actions import Submit
from graph_planner.episode.patch import RepairRequest
from graph_planner.episode.wire import parse_action
from graph_planner.models.chat import ChatError, HFChatModel, OpenAIChatClient, chat_completions_url
from graph_planner.models.serve import create_app
from graph_planner.models.synthesizers import CGMHttpSynthesizer, LLMSynthesizer
from graph_planner.models.toy import resolve_model_path

GREEDY = SamplingConfig(do_sample=False, max_new_tokens=12)


@pytest.fixture(scope="module")
def toy_chat():
    path = resolve_model_path("toy", RunConfig().paths.cache_dir)
    return HFChatModel(path, sampling=GREEDY, seed=0)


@pytest.fixture(scope="module")
def server(toy_chat):
    with serving(create_app(toy_chat, "toy")) as url:
        yield url


def test_hf_chat_model_returns_token_ids_and_logprobs(toy_chat):
    messages = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "find truncate"}]
    first = toy_chat.chat(messages)
    again = toy_chat.chat(messages)
    assert first.text == again.text  # greedy decoding is deterministic
    assert first.prompt_token_ids == toy_chat.encode_chat(messages)
    assert 0 < len(first.response_token_ids) <= 12 == GREEDY.max_new_tokens
    assert len(first.response_logprobs) == len(first.response_token_ids) == first.completion_tokens
    assert all(lp <= 0 and math.isfinite(lp) for lp in first.response_logprobs)
    sampled = toy_chat.chat(messages, sampling=SamplingConfig(temperature=0.7, max_new_tokens=5))
    assert len(sampled.response_token_ids) <= 5


def test_hf_chat_model_cuts_prompts_to_the_training_budget_like_the_trainer(toy_chat):
    """`gp eval` of a trained model sees the prompts training showed it: the last training.max_prompt_length tokens
    (uncut, a toy model trained on 128-token prompts answered held-out tasks with parse errors only)."""
    from graph_planner.agents.factory import make_chat_model

    messages = [{"role": "system", "content": "You fix bugs. " * 40}, {"role": "user", "content": "find truncate"}]
    full = toy_chat.encode_chat(messages)
    budget = 32
    assert len(full) > budget
    cut = HFChatModel(toy_chat.model_path, sampling=GREEDY, model=toy_chat.model, tokenizer=toy_chat.tokenizer,
                      max_prompt_tokens=budget)
    response = cut.chat(messages)
    assert response.prompt_token_ids == full[-budget:] and response.prompt_tokens == budget
    assert cut.truncated_prompts == 1
    assert toy_chat.chat(messages).prompt_token_ids == full  # no budget: the whole prompt
    config = RunConfig.model_validate({"training": {"max_prompt_length": 48}})
    assert make_chat_model(config).max_prompt_tokens == 48


def test_openai_client_against_gp_serve_on_loopback(server):
    client = OpenAIChatClient(server, "toy", sampling=GREEDY)
    response = client.chat([{"role": "user", "content": "hello"}])
    assert response.prompt_tokens > 0 and 0 < response.completion_tokens <= 12
    assert response.finish_reason in ("stop", "length")
    raw = httpx.post(f"{server}/v1/chat/completions", json={
        "model": "toy", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 3, "temperature": 0})
    body = raw.json()
    assert body["object"] == "chat.completion" and body["choices"][0]["message"]["role"] == "assistant"
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    assert body["usage"]["completion_tokens"] <= 3
    wrong = httpx.post(f"{server}/v1/chat/completions", json={"model": "gpt-9", "messages": [{"role": "user",
                                                                                             "content": "x"}]})
    assert wrong.status_code == 404 and "toy" in wrong.text
    assert httpx.get(f"{server}/v1/models").json()["data"][0]["id"] == "toy"


def test_cgm_generate_endpoint_round_trip(server):
    request = RepairRequest("t1", "truncate() is too long", "cut len(ellipsis)",
                            {"nodes": [{"id": "fn:a.py::truncate", "nodeType": "Function"}], "edges": []},
                            [{"node_id": "fn:a.py::truncate", "path": "a.py", "start_line": 1, "end_line": 1,
                              "code": "return text[:n] + e"}])
    synth = CGMHttpSynthesizer(server, CGMGenerationConfig(do_sample=False, max_new_tokens=8))
    proposal = synth.synthesize(request)
    assert proposal.raw  # the toy model answered; its text is no patch, so the proposal says why
    assert not proposal.has_patch and proposal.error.startswith("no-patch: unparsable-output")
    assert proposal.completion_tokens > 0 and proposal.seconds > 0
    bad = httpx.post(f"{server}/generate", json={"plan": "x"})
    assert bad.status_code == 422 and "issue" in bad.text


def test_llm_synthesizer_over_http_reports_unparsable_output(server):
    synth = LLMSynthesizer(OpenAIChatClient(server, "toy", use_tools=False),
                           CGMGenerationConfig(do_sample=False, max_new_tokens=6, num_return_sequences=2))
    proposal = synth.synthesize(RepairRequest("t1", "issue", "plan"))
    assert proposal.error.startswith("unparsable-output") and proposal.meta["samples"] == 2


def _recording_transport(responses: list[httpx.Response], seen: list[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses.pop(0)
    return httpx.MockTransport(handler)


def _completion(message: dict) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"message": message, "finish_reason": "tool_calls"}],
                                     "usage": {"prompt_tokens": 7, "completion_tokens": 2}})


def test_openai_client_payload_auth_tools_and_retry(monkeypatch):
    monkeypatch.setenv("MY_PLANNER_KEY", "sk-test")
    seen: list[httpx.Request] = []
    tool_call = {"id": "c1", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
    transport = _recording_transport([httpx.Response(503, text="warming up"),
                                      _completion({"role": "assistant", "content": None,
                                                   "tool_calls": [tool_call]})], seen)
    client = OpenAIChatClient("http://vllm:8000/v1", "qwen", api_key_env="MY_PLANNER_KEY", transport=transport,
                              sampling=SamplingConfig(temperature=0.3, top_k=20, max_new_tokens=64), backoff_s=0)
    response = client.chat([{"role": "user", "content": "go"}], tools=[{"type": "function", "function": {}}])
    assert len(seen) == 2 and str(seen[-1].url) == "http://vllm:8000/v1/chat/completions"
    assert seen[-1].headers["authorization"] == "Bearer sk-test"
    payload = json.loads(seen[-1].content)
    assert payload["model"] == "qwen" and payload["max_tokens"] == 64 and payload["temperature"] == 0.3
    assert payload["top_k"] == 20 and payload["tool_choice"] == "auto" and "repetition_penalty" not in payload
    assert parse_action(response.message()) == Submit() and response.prompt_tokens == 7


def test_openai_client_errors_name_the_endpoint_and_do_not_retry_client_errors(monkeypatch):
    monkeypatch.delenv("ABSENT_KEY", raising=False)
    seen: list[httpx.Request] = []
    transport = _recording_transport([httpx.Response(400, text="bad request: max_tokens too large")], seen)
    client = OpenAIChatClient("http://srv:1234", "m", api_key_env="ABSENT_KEY", transport=transport, retries=3)
    with pytest.raises(ChatError, match=r"http://srv:1234/v1/chat/completions.*HTTP 400: bad request"):
        client.chat([{"role": "user", "content": "x"}])
    assert len(seen) == 1 and "authorization" not in seen[0].headers


def test_chat_completions_url_forms():
    assert chat_completions_url("http://h:1") == "http://h:1/v1/chat/completions"
    assert chat_completions_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    assert chat_completions_url("http://h:1/v1/chat/completions") == "http://h:1/v1/chat/completions"


def test_policy_handle_chat_feeds_the_trainers_generation_into_the_model_policy(toy_chat):
    from graph_planner.agents.model_policy import ModelPolicy
    from graph_planner.models.chat import PolicyHandleChat
    from graph_planner.training.local.policy_handle import PolicyHandle

    handle = PolicyHandle(toy_chat.model, toy_chat.tokenizer, max_prompt_length=2048, max_response_length=8)
    policy = ModelPolicy(PolicyHandleChat(handle, GREEDY), history_turns=2)
    decision = policy.act("Task t1 in repository r.\nIssue: x", {}, [])
    assert decision.prompt_token_ids and decision.response_token_ids
    assert len(decision.response_logprobs) == len(decision.response_token_ids) <= 8
    assert decision.messages[0]["role"] == "system" and decision.messages[1]["content"].startswith("Task t1")
    assert decision.action is None and decision.parse_error is not None  # an untrained toy model emits no action


def test_gp_serve_is_registered_with_its_options():
    from typer.testing import CliRunner

    from graph_planner.cli import app

    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0
    assert all(flag in result.output for flag in ("--model", "--host", "--port"))


# --- gp serve through the official openai client (what users and rLLM's OpenAIEngine call it with) ----------------

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def openai_client(server):
    openai = pytest.importorskip("openai")  # a dev dependency (pyproject.toml [dev], locked)
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0)
    yield client
    client.close()


def test_official_openai_client_chat_models_and_a_wrong_model(openai_client):
    import openai

    answer = openai_client.chat.completions.create(model="toy", messages=HELLO, max_tokens=6, temperature=0)
    assert answer.object == "chat.completion" and answer.choices[0].message.role == "assistant"
    assert 0 < answer.usage.completion_tokens <= 6 and answer.choices[0].finish_reason in ("stop", "length")
    assert [m.id for m in openai_client.models.list()] == ["toy"]
    with pytest.raises(openai.NotFoundError, match="not served here"):
        openai_client.chat.completions.create(model="gpt-9", messages=HELLO)


def test_stream_true_is_answered_with_server_sent_events(openai_client):
    """stream=True gave the client zero chunks and no error; now the chunks carry the same answer."""
    whole = openai_client.chat.completions.create(model="toy", messages=HELLO, max_tokens=8, temperature=0)
    chunks = list(openai_client.chat.completions.create(model="toy", messages=HELLO, max_tokens=8, temperature=0,
                                                        stream=True, stream_options={"include_usage": True}))
    assert len(chunks) >= 3 and all(c.object == "chat.completion.chunk" for c in chunks)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    assert "".join(d.content or "" for d in deltas) == (whole.choices[0].message.content or "")
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens  # include_usage: the last chunk


@pytest.mark.parametrize(("fields", "param"), [({"n": 2}, "n"), ({"logprobs": True}, "logprobs"),
                                               ({"extra_body": {"best_of": 3}}, "best_of"),
                                               ({"temperature": -1}, "temperature")])
def test_fields_the_server_cannot_honour_are_a_400_naming_the_field(openai_client, fields, param):
    import openai

    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.chat.completions.create(model="toy", messages=HELLO, max_tokens=2, **fields)
    assert exc.value.status_code == 400 and exc.value.body["param"] == param
    assert param in exc.value.body["message"]


def test_completions_endpoint_answers_a_templated_prompt_as_vllm_does(openai_client, toy_chat):
    """rLLM's OpenAIEngine with a tokenizer templates the chat itself and calls /v1/completions (404 before)."""
    prompt = toy_chat.tokenizer.apply_chat_template(HELLO, add_generation_prompt=True, tokenize=False)
    via_chat = openai_client.chat.completions.create(model="toy", messages=HELLO, max_tokens=8, temperature=0)
    done = openai_client.completions.create(model="toy", prompt=prompt, max_tokens=8, temperature=0,
                                            extra_body={"add_special_tokens": False})
    assert done.object == "text_completion" and done.usage.prompt_tokens == via_chat.usage.prompt_tokens
    assert done.choices[0].text.strip() == (via_chat.choices[0].message.content or "").strip()
    ids = toy_chat.encode_chat(HELLO)
    by_ids = openai_client.completions.create(model="toy", prompt=ids, max_tokens=8, temperature=0)
    assert by_ids.choices[0].text == done.choices[0].text and by_ids.usage.prompt_tokens == len(ids)
    streamed = list(openai_client.completions.create(model="toy", prompt=ids, max_tokens=8, temperature=0,
                                                     stream=True))
    assert "".join(c.choices[0].text for c in streamed) == done.choices[0].text
    assert streamed[-1].choices[0].finish_reason == done.choices[0].finish_reason
