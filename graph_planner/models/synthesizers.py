"""Patch synthesisers: turn a repair request (issue, plan, memory subgraph, snippets) into a patch proposal.

`cgm` posts the request to a CodeFuse-CGM style `/generate` service, `llm` asks any OpenAI-compatible chat model,
`hf` a local transformers model, `none` never patches. `gold` returns the task's gold patch and exists only as a
clearly labelled diagnostic (the upper bound of the env); `oracle` (models/oracle.py) is the gold patch only when
the request's memory holds the code it changes (a localisation signal). Neither is ever a default.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from typing import Any, Protocol, runtime_checkable

import httpx

from graph_planner.config.schema import CGMGenerationConfig, RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.episode.patch import (
    PatchFormatError,
    PatchProposal,
    RepairRequest,
    edits_from_payload,
    parse_patch_output,
)
from graph_planner.models.chat import ChatError, ChatModel, HFChatModel, OpenAIChatClient

log = logging.getLogger(__name__)

SYNTHESIS_SYSTEM_PROMPT = """You repair Python code. You get an issue, a plan, a code subgraph and code snippets \
with line numbers. Reply with ONE of:
1. a JSON object {"edits": [{"path": "<file>", "start": <first line>, "end": <last line>, "new_text": "<lines>"}]} \
where each edit replaces lines start..end (1-based, inclusive) of the file with new_text;
2. a unified diff (--- a/<file> / +++ b/<file> headers).
Change only what the fix needs. Never edit tests."""


@runtime_checkable
class PatchSynthesizer(Protocol):
    """Anything that proposes a patch for a repair request; ``name`` is recorded in step info."""

    name: str

    def synthesize(self, request: RepairRequest) -> PatchProposal: ...


def format_request(request: RepairRequest) -> str:
    """The user message of a text synthesiser: the CGM request sections as plain text."""
    parts = [f"[Issue]\n{request.issue.strip()}", f"[Plan]\n{request.plan.strip()}"]
    if request.target_node_ids:
        parts.append("[Targets]\n" + "\n".join(request.target_node_ids))
    if request.notes:
        parts.append("[Notes]\n" + "\n".join(f"- {n}" for n in request.notes))
    nodes = request.graph.get("nodes", [])
    if nodes:
        lines = [f"- {n.get('id')} [{n.get('nodeType')}] {n.get('filePath', '')}:{n.get('startLine', '')}-"
                 f"{n.get('endLine', '')}" for n in nodes]
        lines += [f"  {e.get('src')} -{e.get('edgeType')}-> {e.get('dst')}" for e in request.graph.get("edges", [])]
        parts.append("[Subgraph]\n" + "\n".join(lines))
    for snip in request.snippets:
        start = int(snip.get("start_line", 1))
        code = "\n".join(f"{start + i:5d}| {line}" for i, line in enumerate(str(snip.get("code", "")).splitlines()))
        parts.append(f"[Snippet] {snip.get('path')}:{start}-{snip.get('end_line')} ({snip.get('node_id')})\n{code}")
    if request.constraints:
        parts.append("[Constraints]\n" + "\n".join(f"{k}: {v}" for k, v in request.constraints.items()))
    return "\n\n".join(parts)


def synthesis_messages(request: RepairRequest) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYNTHESIS_SYSTEM_PROMPT}, {"role": "user", "content": format_request(request)}]


def proposal_from_text(text: str, **extra: Any) -> PatchProposal:
    """Parse a model's text into a proposal; an unparsable text becomes a proposal with ``error``."""
    try:
        edits, diff = parse_patch_output(text)
    except PatchFormatError as exc:
        return PatchProposal(raw=text, error=f"unparsable-output: {exc}", **extra)
    return PatchProposal(edits=edits, diff=diff, raw=text, **extra)


class NoSynthesizer:
    """Never proposes a patch (planner-only runs, `--disable-cgm-synthesis`, `cgm_backend: none`)."""

    name = "none"

    def __init__(self, reason: str = "no synthesiser configured") -> None:
        self.reason = reason

    def synthesize(self, request: RepairRequest) -> PatchProposal:
        return PatchProposal(error=f"synthesis-disabled: {self.reason}")


class GoldSynthesizer:
    """DIAGNOSTIC ONLY: returns the task's gold patch, to measure the env's upper bound. Results carry
    ``diagnostic: gold`` so they can never be mistaken for a model's."""

    name = "gold"

    def __init__(self, task: TaskRecord) -> None:
        self.task = task

    def synthesize(self, request: RepairRequest) -> PatchProposal:
        if not self.task.gold_patch:
            return PatchProposal(error=f"no-gold-patch: task {self.task.task_id} has none", diagnostic="gold")
        return PatchProposal(diff=self.task.gold_patch, raw=self.task.gold_patch, diagnostic="gold")


class LLMSynthesizer:
    """A chat model asked for edits JSON or a unified diff; tries up to ``num_return_sequences`` samples."""

    name = "llm"

    def __init__(self, chat: ChatModel, generation: CGMGenerationConfig | None = None) -> None:
        self.chat = chat
        self.generation = generation or CGMGenerationConfig()

    def synthesize(self, request: RepairRequest) -> PatchProposal:
        messages = synthesis_messages(request)
        started, prompt_tokens, completion_tokens = time.perf_counter(), 0, 0
        proposal = PatchProposal(error="no sample")
        for attempt in range(self.generation.num_return_sequences):
            try:
                response = self.chat.chat(messages, sampling=self.generation)
            except ChatError as exc:
                return PatchProposal(error=f"synthesiser-error: {exc}", seconds=time.perf_counter() - started)
            prompt_tokens += response.prompt_tokens
            completion_tokens += response.completion_tokens
            proposal = proposal_from_text(response.text)
            proposal.meta["samples"] = attempt + 1
            if proposal.has_patch:
                break
        proposal.prompt_tokens, proposal.completion_tokens = prompt_tokens, completion_tokens
        proposal.seconds = time.perf_counter() - started
        return proposal


class HFSynthesizer(LLMSynthesizer):
    """The LLM synthesiser over a local transformers checkpoint."""

    name = "hf"

    def __init__(self, model_path: str, generation: CGMGenerationConfig | None = None, dtype: str = "float32",
                 device_map: str | list[int] | None = "auto", max_gpu_memory: str | None = None) -> None:
        placement = tuple(device_map) if isinstance(device_map, list) else device_map  # hashable for the cache
        super().__init__(_load_hf_chat(model_path, dtype, placement, max_gpu_memory), generation)


@functools.lru_cache(maxsize=2)
def _load_hf_chat(model_path: str, dtype: str, device_map: str | tuple[int, ...] | None,
                  max_gpu_memory: str | None = None) -> HFChatModel:
    return HFChatModel(model_path, dtype=dtype, device_map=device_map, max_gpu_memory=max_gpu_memory)


class CGMHttpSynthesizer:
    """POSTs the CGM request ``{issue, plan, graph: {nodes, edges}, snippets, constraints, ...}`` to `/generate`.

    The service answers ``{"edits": [...]}`` or ``{"patch": {"edits": [...]}}`` or ``{"diff": "..."}``, plus
    ``raw`` (the model text) and optional ``error`` and ``usage``.
    """

    name = "cgm"

    def __init__(self, endpoint: str, generation: CGMGenerationConfig | None = None, api_key_env: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        base = endpoint.rstrip("/")
        self.url = base if base.endswith("/generate") else base + "/generate"
        self.generation = generation or CGMGenerationConfig()
        headers = {}
        key = os.environ.get(api_key_env) if api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(timeout=self.generation.timeout_s, headers=headers, transport=transport)

    def synthesize(self, request: RepairRequest) -> PatchProposal:
        payload = {**request.to_json(), "generation": self.generation.model_dump()}
        started = time.perf_counter()
        try:
            resp = self._client.post(self.url, json=payload)
        except httpx.HTTPError as exc:
            return PatchProposal(error=f"synthesiser-error: POST {self.url} failed: {type(exc).__name__}: {exc}",
                                 seconds=time.perf_counter() - started)
        seconds = time.perf_counter() - started
        if resp.status_code != 200:
            return PatchProposal(error=f"synthesiser-error: POST {self.url} -> HTTP {resp.status_code}: "
                                 f"{resp.text[:200]}", seconds=seconds)
        try:
            data = resp.json()
        except ValueError:
            return PatchProposal(error=f"synthesiser-error: {self.url} answered non-JSON", seconds=seconds)
        usage = data.get("usage") or {}
        extra = {"seconds": seconds, "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                 "completion_tokens": int(usage.get("completion_tokens", 0))}
        raw = str(data.get("raw", ""))
        if data.get("edits") is None and data.get("patch") is None and data.get("diff") is None:
            reason = data.get("error") or "service returned no patch"
            return PatchProposal(raw=raw, error=f"no-patch: {reason}", **extra)
        try:
            edits, diff = edits_from_payload(data)
        except PatchFormatError as exc:
            return PatchProposal(raw=raw, error=f"unparsable-output: {exc}", **extra)
        return PatchProposal(edits=edits, diff=diff, raw=raw, **extra)


def make_synthesizer(config: RunConfig, task: TaskRecord) -> PatchSynthesizer:
    """The synthesiser chosen by ``backends.cgm_backend`` (``env.disable_cgm_synthesis`` wins: none)."""
    backend = config.backends.cgm_backend
    if config.env.disable_cgm_synthesis:
        return NoSynthesizer("env.disable_cgm_synthesis / --disable-cgm-synthesis is set")
    if backend == "none":
        return NoSynthesizer("backends.cgm_backend is none")
    if backend == "gold":
        log.warning("backends.cgm_backend=gold: DIAGNOSTIC run, patches are the tasks' gold patches (upper bound)")
        return GoldSynthesizer(task)
    if backend == "oracle":
        from graph_planner.models.oracle import OracleSynthesizer

        log.info("backends.cgm_backend=oracle: DIAGNOSTIC run, the gold patch only when memory M holds the code it "
                 "changes (a localisation signal, not a model)")
        return OracleSynthesizer(task)
    if backend in ("cgm", "llm"):
        endpoint = config.backends.cgm_endpoint
        if not endpoint:
            raise ValueError(f"backends.cgm_backend={backend} needs backends.cgm_endpoint (the service URL)")
        if backend == "cgm":
            return CGMHttpSynthesizer(endpoint, config.cgm_generation, config.backends.cgm_api_key_env)
        chat = OpenAIChatClient(endpoint, config.paths.cgm_model or "default", config.backends.cgm_api_key_env,
                                sampling=config.cgm_generation, timeout_s=config.cgm_generation.timeout_s,
                                use_tools=False)
        return LLMSynthesizer(chat, config.cgm_generation)
    if backend == "hf":
        if not config.paths.cgm_model:
            raise ValueError("backends.cgm_backend=hf needs paths.cgm_model (a local checkpoint directory)")
        from graph_planner.models.toy import resolve_model_path

        path = resolve_model_path(config.paths.cgm_model, config.paths.cache_dir)  # 'toy' = the built-in toy LM
        return HFSynthesizer(path, config.cgm_generation, config.backends.dtype, config.backends.device_map_cgm,
                             config.backends.max_gpu_memory)
    raise ValueError(f"backends.cgm_backend: unknown synthesiser {backend!r}")
