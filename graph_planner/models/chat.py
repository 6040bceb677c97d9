"""Chat models behind one small protocol: an OpenAI-compatible HTTP client (vLLM, `gp serve`, any server) and a
local Hugging Face transformers model that also returns token ids and log-probs for training."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import httpx

from graph_planner.config.schema import SamplingConfig

log = logging.getLogger(__name__)
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
#: transformers' ``model_max_length`` when the tokenizer names no limit (VERY_LARGE_INTEGER, 1e30).
_NO_TOKENIZER_LIMIT = 10**18
_HERMES_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


class ChatError(RuntimeError):
    """A chat request failed; the message names the endpoint or model and what to check."""


@dataclass
class ChatResponse:
    """One assistant turn. Token ids / log-probs are filled by local models (training needs them)."""

    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_token_ids: list[int] | None = None
    response_token_ids: list[int] | None = None
    response_logprobs: list[float] | None = None

    def message(self) -> dict[str, Any]:
        """The assistant message in OpenAI shape (what the action parser reads)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return msg


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a chat: ``supports_tools`` says whether tool definitions are sent natively."""

    supports_tools: bool

    def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
        sampling: SamplingConfig | None = None,
    ) -> ChatResponse: ...


def extract_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Split Hermes/Qwen-style ``<tool_call>{...}</tool_call>`` blocks out of generated text (as vLLM does)."""
    calls = []
    for i, body in enumerate(_HERMES_TOOL_CALL.findall(text)):
        try:
            obj = json.loads(body)
        except json.JSONDecodeError:
            return text, []  # leave malformed output to the strict action parser
        if not isinstance(obj, dict) or "name" not in obj:
            return text, []
        args = obj.get("arguments", {})
        calls.append({"id": f"call_{i}", "type": "function", "function": {
            "name": obj["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}})
    if not calls:
        return text, []
    return _HERMES_TOOL_CALL.sub("", text).strip(), calls


def chat_completions_url(base_url: str) -> str:
    """Accept `http://host:port`, `.../v1` or the full `.../v1/chat/completions`."""
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    if base.endswith("/v1"):
        return base + "/chat/completions"
    return base + "/v1/chat/completions"


def sampling_payload(sampling: SamplingConfig) -> dict[str, Any]:
    """OpenAI request fields for a sampling config; vLLM's extra fields only when they are not neutral."""
    payload: dict[str, Any] = {
        "max_tokens": sampling.max_new_tokens,
        "temperature": sampling.temperature if sampling.do_sample else 0.0,
        "top_p": sampling.top_p,
    }
    if sampling.stop:
        payload["stop"] = list(sampling.stop)
    if sampling.top_k > 0:
        payload["top_k"] = sampling.top_k
    if sampling.repetition_penalty != 1.0:
        payload["repetition_penalty"] = sampling.repetition_penalty
    if sampling.stop_ids:
        payload["stop_token_ids"] = list(sampling.stop_ids)
    return payload


class OpenAIChatClient:
    """`POST /v1/chat/completions` with retries on transport errors and 408/429/5xx, and a per-request timeout.

    The API key is read from the environment variable *named* by the config (``backends.*_api_key_env``);
    when that variable is unset no Authorization header is sent (local vLLM / `gp serve` need none).
    """

    def __init__(
        self, base_url: str, model: str, api_key_env: str | None = None, sampling: SamplingConfig | None = None,
        timeout_s: float = 120.0, retries: int = 2, backoff_s: float = 0.5, use_tools: bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = chat_completions_url(base_url)
        self.model = model
        self.sampling = sampling or SamplingConfig()
        self.retries = retries
        self.backoff_s = backoff_s
        self.supports_tools = use_tools
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(api_key_env) if api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(timeout=timeout_s, headers=headers, transport=transport)

    def close(self) -> None:
        self._client.close()

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        last = ""
        for attempt in range(self.retries + 1):
            try:
                resp = self._client.post(self.url, json=payload)
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code == 200:
                    try:
                        return resp.json()
                    except ValueError:
                        raise ChatError(f"{self.url}: response is not JSON: {resp.text[:200]!r}") from None
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code not in _RETRY_STATUS:
                    break
            if attempt < self.retries:
                time.sleep(self.backoff_s * (2**attempt))
        raise ChatError(f"chat request to {self.url} (model {self.model!r}) failed after {self.retries + 1} "
                        f"attempt(s): {last}. Check backends.*_endpoint and that the server is up.")

    def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
        sampling: SamplingConfig | None = None,
    ) -> ChatResponse:
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "n": 1,
                                   **sampling_payload(sampling or self.sampling)}
        if tools and self.supports_tools:
            payload["tools"] = tools
            payload["tool_choice"] = "auto"
        data = self._post(payload)
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ChatError(f"{self.url}: unexpected response shape: {json.dumps(data)[:300]}") from None
        usage = data.get("usage") or {}
        return ChatResponse(
            text=message.get("content") or "",
            tool_calls=list(message.get("tool_calls") or []),
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )


def hf_placement(device_map: str | Sequence[int], max_gpu_memory: str | None = None) -> dict[str, Any]:
    """``from_pretrained`` placement kwargs: an HF device-map string as is, or a GPU list (seed 000's
    ``device_map_* = [0,1,2,3]``) as "only these GPUs": one GPU -> ``{"": i}``, several -> ``auto`` with a
    ``max_memory`` naming only them (``backends.max_gpu_memory`` each, else the whole card)."""
    if isinstance(device_map, str):
        return {"device_map": device_map} | ({"max_memory": _all_gpus(max_gpu_memory)} if max_gpu_memory else {})
    gpus = list(device_map)
    if len(gpus) == 1:
        return {"device_map": {"": gpus[0]}}
    return {"device_map": "auto", "max_memory": {i: max_gpu_memory or _card_memory(i) for i in gpus}}


def _card_memory(index: int) -> int:
    import torch

    return int(torch.cuda.get_device_properties(index).total_memory)


def _all_gpus(cap: str) -> dict[int, str]:
    import torch

    return {i: cap for i in range(torch.cuda.device_count())}


def finish_reason(response_ids: list[int], eos: int | None, max_new_tokens: int) -> str:
    """OpenAI's finish_reason of a local generation: "length" when it used the whole token budget without EOS."""
    return "stop" if (response_ids and response_ids[-1] == eos) or len(response_ids) < max_new_tokens else "length"


def cut_prompt(ids: list[int], budget: int, cut_so_far: int, setting: str) -> tuple[list[int], bool]:
    """The one rule for a prompt over its token budget, in training and eval alike: keep its last ``budget``
    tokens (the end holds the latest observation). Returns (ids, whether they were cut); the first cut a holder
    makes (``cut_so_far`` 0) is logged as a warning naming ``setting``, later ones at debug."""
    if len(ids) <= budget:
        return ids, False
    (log.warning if cut_so_far == 0 else log.debug)("prompt of %d tokens cut to its last %d (%s)", len(ids),
                                                    budget, setting)
    return ids[-budget:], True


class HFChatModel:
    """A local transformers causal LM driven through its chat template.

    Returns the prompt/response token ids and the log-probs of the sampled tokens under logits / temperature
    (no top-p/top-k; greedy counts as temperature 1), the quantity the GRPO trainer recomputes.
    """

    supports_tools = False  # tools are described in the system prompt; output goes through the text protocol

    def __init__(
        self, model_path: str, sampling: SamplingConfig | None = None, tokenizer_path: str | None = None,
        dtype: str = "float32", device_map: str | Sequence[int] | None = "auto", seed: int | None = None,
        model: Any = None, tokenizer: Any = None, max_gpu_memory: str | None = None,
        max_prompt_tokens: int | None = None, prompt_budget_setting: str = "training.max_prompt_length, as in training",
    ) -> None:
        """``max_prompt_tokens``: prompts are cut to their last N tokens, as training cuts them
        (``training.max_prompt_length``), so a trained model is evaluated on the prompts it learned from;
        ``prompt_budget_setting`` names that budget in the cut's warning (`gp serve`: ``--max-prompt-tokens``)."""
        from graph_planner.imports import import_lock
        from graph_planner.models.loading import load_causal_lm

        with import_lock():  # several episode threads build their models at once (graph_planner/imports.py)
            import torch
            from transformers import AutoTokenizer
        self.sampling = sampling or SamplingConfig()
        self.model_path = model_path
        self._torch = torch
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(tokenizer_path or model_path)
        if model is None:
            torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
            kwargs: dict[str, Any] = {"dtype": torch_dtype}
            if device_map and torch.cuda.is_available():
                kwargs.update(hf_placement(device_map, max_gpu_memory))
            model = load_causal_lm(model_path, **kwargs)
        self.model = model.eval()
        self.max_prompt_tokens = max_prompt_tokens
        self.prompt_budget_setting = prompt_budget_setting
        self.truncated_prompts = 0
        if seed is not None:
            torch.manual_seed(seed)

    def encode_chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> list[int]:
        enc = self.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True,
                                                 return_dict=True)
        return list(enc["input_ids"])

    def prompt_ids(self, messages_or_text: list[dict[str, Any]] | str | list[int],
                   tools: list[dict[str, Any]] | None = None, add_special_tokens: bool = True) -> list[int]:
        """The uncut prompt of a chat (templated), a text (tokenized as vLLM's ``/v1/completions`` does) or ids."""
        if isinstance(messages_or_text, str):
            return list(self.tokenizer.encode(messages_or_text, add_special_tokens=add_special_tokens))
        if all(isinstance(tok, int) for tok in messages_or_text):
            return list(messages_or_text)  # type: ignore[arg-type]
        return self.encode_chat(messages_or_text, tools)  # type: ignore[arg-type]

    def cut(self, ids: list[int], n: int | None = None) -> list[int]:
        """``ids`` cut to their last ``n`` tokens (default ``max_prompt_tokens``; None: uncut) by
        :func:`cut_prompt`, training's rule; the first cut this model makes is logged as a warning."""
        budget = self.max_prompt_tokens if n is None else n
        if budget is None:
            return ids
        ids, was_cut = cut_prompt(ids, budget, self.truncated_prompts, self.prompt_budget_setting)
        self.truncated_prompts += was_cut
        return ids

    def context_length(self) -> int | None:
        """The most tokens (prompt + completion) the model takes: its config's ``max_position_embeddings``
        (``n_positions``), else the tokenizer's ``model_max_length`` when that is a real limit; None if neither."""
        config = getattr(self.model, "config", None)
        for name in ("max_position_embeddings", "n_positions"):
            value = getattr(config, name, None)
            if isinstance(value, int) and value > 0:
                return value
        limit = getattr(self.tokenizer, "model_max_length", None)
        return limit if isinstance(limit, int) and 0 < limit < _NO_TOKENIZER_LIMIT else None

    def generate_ids(self, prompt_ids: list[int], sampling: SamplingConfig) -> tuple[list[int], list[float]]:
        """Sample a continuation; returns (response token ids, their log-probs)."""
        torch = self._torch
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([prompt_ids], device=device)
        kwargs: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens,
            "do_sample": sampling.do_sample and sampling.temperature > 0,
            "repetition_penalty": sampling.repetition_penalty,
            "return_dict_in_generate": True,
            "output_logits": True,
            "attention_mask": torch.ones_like(input_ids),
            "pad_token_id": self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None
            else self.tokenizer.eos_token_id,
        }
        if kwargs["do_sample"]:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or None)
        if sampling.stop:
            kwargs.update(stop_strings=list(sampling.stop), tokenizer=self.tokenizer)
        if sampling.stop_ids:
            eos = self.tokenizer.eos_token_id
            kwargs["eos_token_id"] = list(sampling.stop_ids) + ([eos] if eos is not None else [])
        with torch.no_grad():
            out = self.model.generate(input_ids, **kwargs)
        response = out.sequences[0, len(prompt_ids):]
        temperature = sampling.temperature if kwargs["do_sample"] else 1.0
        logprobs = [
            float(torch.log_softmax(logits[0].float() / temperature, dim=-1)[tok])
            for logits, tok in zip(out.logits, response.tolist())
        ]
        return response.tolist(), logprobs

    def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
        sampling: SamplingConfig | None = None,
    ) -> ChatResponse:
        return self.respond(self.cut(self.encode_chat(messages, tools)), sampling)

    def respond(self, prompt_ids: list[int], sampling: SamplingConfig | None = None) -> ChatResponse:
        """The assistant turn for an already templated (and cut) prompt; `gp serve` checks its length first."""
        sampling = sampling or self.sampling
        response_ids, logprobs = self.generate_ids(prompt_ids, sampling)
        text = self.tokenizer.decode(response_ids, skip_special_tokens=True)
        text, tool_calls = extract_tool_calls(text)
        finish = finish_reason(response_ids, self.tokenizer.eos_token_id, sampling.max_new_tokens)
        return ChatResponse(
            text=text, tool_calls=tool_calls, finish_reason=finish, prompt_tokens=len(prompt_ids),
            completion_tokens=len(response_ids), prompt_token_ids=prompt_ids, response_token_ids=response_ids,
            response_logprobs=logprobs,
        )


class GenerationHandle(Protocol):
    """The training policy handle (graph_planner.training.local.policy_handle.PolicyHandle) seen from here."""

    def generate(self, messages_or_prompt_ids: Any, sampling: SamplingConfig) -> Any: ...


class PolicyHandleChat:
    """A ChatModel over the trainer's policy handle, so rollouts during training go through the same
    ModelPolicy and env as evaluation (``generate`` returns text, prompt ids, response ids, log-probs)."""

    supports_tools = False

    def __init__(self, handle: GenerationHandle, sampling: SamplingConfig | None = None) -> None:
        self.handle = handle
        self.sampling = sampling or SamplingConfig()

    def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
        sampling: SamplingConfig | None = None,
    ) -> ChatResponse:
        sampling = sampling or self.sampling
        text, prompt_ids, response_ids, logprobs = self.handle.generate(messages, sampling)
        text, tool_calls = extract_tool_calls(text)
        finish = getattr(self.handle, "finish_reason", None)  # handles without one cannot tell: "stop"
        return ChatResponse(text=text, tool_calls=tool_calls, prompt_tokens=len(prompt_ids),
                            finish_reason=finish(response_ids, sampling) if finish is not None else "stop",
                            completion_tokens=len(response_ids), prompt_token_ids=list(prompt_ids),
                            response_token_ids=list(response_ids), response_logprobs=list(logprobs))
