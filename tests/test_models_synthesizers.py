"""Patch synthesisers: selection from the config (gold only as a labelled diagnostic), the CGM request schema on
the wire, and the LLM synthesiser's prompt and output parsing."""

from __future__ import annotations

import json

import httpx
import pytest

from graph_planner.config.schema import CGMGenerationConfig, RunConfig
from graph_planner.env.samples import sample_task
from graph_planner.episode.patch import FileEdit, RepairRequest
from graph_planner.models.chat import ChatResponse
from graph_planner.models.synthesizers import (
    CGMHttpSynthesizer,
    GoldSynthesizer,
    LLMSynthesizer,
    NoSynthesizer,
    format_request,
    make_synthesizer,
)

REQUEST = RepairRequest(
    task_id="t1", issue="truncate() is too long", plan="subtract len(ellipsis)",
    graph={"nodes": [{"id": "fn:a.py::truncate", "nodeType": "Function", "filePath": "a.py", "startLine": 3,
                      "endLine": 4}], "edges": [{"src": "file:a.py", "dst": "fn:a.py::truncate",
                                                 "edgeType": "contains"}]},
    snippets=[{"node_id": "fn:a.py::truncate", "path": "a.py", "start_line": 3, "end_line": 4,
               "code": "def truncate(t, n, e='...'):\n    return t[:n] + e"}],
    notes=["off by len(e)"], target_node_ids=["fn:a.py::truncate"], constraints={"max_files": 5},
)


def _config(**backends) -> RunConfig:
    return RunConfig.model_validate({"backends": backends})


def test_make_synthesizer_selection_and_errors():
    task = sample_task("graphplanner-samples__textkit-7")
    assert isinstance(make_synthesizer(_config(cgm_backend="none"), task), NoSynthesizer)
    gold = make_synthesizer(_config(cgm_backend="gold"), task)
    assert isinstance(gold, GoldSynthesizer)
    proposal = gold.synthesize(REQUEST)
    assert proposal.diff == task.gold_patch and proposal.diagnostic == "gold"
    disabled = RunConfig.model_validate({"backends": {"cgm_backend": "gold"}, "env": {"disable_cgm_synthesis": True}})
    assert make_synthesizer(disabled, task).synthesize(REQUEST).error.startswith("synthesis-disabled")
    assert RunConfig().backends.cgm_backend != "gold"  # never the default
    with pytest.raises(ValueError, match="backends.cgm_endpoint"):
        make_synthesizer(_config(cgm_backend="cgm"), task)
    with pytest.raises(ValueError, match="paths.cgm_model"):
        make_synthesizer(_config(cgm_backend="hf"), task)
    cgm = make_synthesizer(_config(cgm_backend="cgm", cgm_endpoint="http://cgm:30001"), task)
    assert isinstance(cgm, CGMHttpSynthesizer) and cgm.url == "http://cgm:30001/generate"
    llm = make_synthesizer(_config(cgm_backend="llm", cgm_endpoint="http://llm:8000/v1"), task)
    assert isinstance(llm, LLMSynthesizer) and llm.chat.url == "http://llm:8000/v1/chat/completions"


def test_gold_without_a_gold_patch_says_so():
    task = sample_task("graphplanner-samples__textkit-7").model_copy(update={"gold_patch": None})
    proposal = GoldSynthesizer(task).synthesize(REQUEST)
    assert not proposal.has_patch and proposal.error.startswith("no-gold-patch") and proposal.diagnostic == "gold"


def test_cgm_http_request_schema_and_response_forms(monkeypatch):
    monkeypatch.setenv("CGM_TEST_KEY", "k1")
    seen: list[httpx.Request] = []
    replies = [
        httpx.Response(200, json={"patch": {"edits": [{"path": "a.py", "start": 4, "end": 4,
                                                       "new_text": "    return t[:n - len(e)] + e\n"}]},
                                  "raw": "model text", "usage": {"prompt_tokens": 50, "completion_tokens": 9}}),
        httpx.Response(200, json={"raw": "I don't know", "error": "empty generation"}),
        httpx.Response(500, text="CUDA out of memory"),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return replies.pop(0)

    synth = CGMHttpSynthesizer("http://cgm:30001/generate", CGMGenerationConfig(max_new_tokens=99),
                               api_key_env="CGM_TEST_KEY", transport=httpx.MockTransport(handler))
    first = synth.synthesize(REQUEST)
    body = json.loads(seen[0].content)
    assert set(body) >= {"issue", "plan", "graph", "snippets", "constraints", "notes", "targets", "generation"}
    assert body["graph"]["nodes"][0]["nodeType"] == "Function" and body["graph"]["edges"][0]["edgeType"] == "contains"
    assert body["generation"]["max_new_tokens"] == 99 and seen[0].headers["authorization"] == "Bearer k1"
    assert first.edits == [FileEdit("a.py", 4, 4, "    return t[:n - len(e)] + e\n")]
    assert first.raw == "model text" and first.prompt_tokens == 50 and first.completion_tokens == 9
    second = synth.synthesize(REQUEST)
    assert not second.has_patch and second.error == "no-patch: empty generation" and second.raw == "I don't know"
    third = synth.synthesize(REQUEST)
    assert third.error.startswith("synthesiser-error: POST http://cgm:30001/generate -> HTTP 500")


def test_cgm_http_unreachable_service_is_an_error_not_an_exception():
    synth = CGMHttpSynthesizer("http://127.0.0.1:9", CGMGenerationConfig(timeout_s=2))
    proposal = synth.synthesize(REQUEST)
    assert proposal.error.startswith("synthesiser-error: POST http://127.0.0.1:9/generate failed")


class ScriptedChat:
    """Stands in for a synthesiser MODEL (none can run here)."""

    supports_tools = False

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = list(outputs)
        self.messages: list[list[dict]] = []

    def chat(self, messages, tools=None, sampling=None) -> ChatResponse:
        self.messages.append(messages)
        return ChatResponse(text=self.outputs.pop(0), prompt_tokens=100, completion_tokens=20)


def test_llm_synthesizer_prompt_and_retries_until_a_patch_parses_scripted_model():
    chat = ScriptedChat(["Let me think...", ("```diff\n--- a/a.py\n+++ b/a.py\n@@ -4 +4 @@\n-    return t[:n] + e\n"
                                            "+    return t[:n - len(e)] + e\n```")])
    synth = LLMSynthesizer(chat, CGMGenerationConfig(num_return_sequences=3))
    proposal = synth.synthesize(REQUEST)
    assert proposal.diff.startswith("--- a/a.py") and proposal.meta["samples"] == 2
    assert proposal.prompt_tokens == 200 and proposal.completion_tokens == 40
    user = chat.messages[0][1]["content"]
    assert "[Issue]\ntruncate() is too long" in user and "[Plan]\nsubtract len(ellipsis)" in user
    assert "    4|     return t[:n] + e" in user  # snippet lines carry their real line numbers
    assert "fn:a.py::truncate [Function] a.py:3-4" in user and "max_files: 5" in user
    assert format_request(REQUEST) == user
