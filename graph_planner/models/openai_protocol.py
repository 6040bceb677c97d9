"""The OpenAI wire format `gp serve` speaks: request models for `/v1/chat/completions` and `/v1/completions` (the
fields it honours, as vLLM spells them), the refusal of fields it cannot honour, and the JSON / server-sent-event
shapes of its answers.

A field the server would silently ignore changes what the client gets (``n: 2`` answered with one choice,
``logprobs: true`` answered without log-probs), so any field outside the honoured set is refused with a 400 naming
it, unless its value is neutral (null, false, 0, empty) or it only labels the request (``user``, ``metadata``).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from graph_planner.config.schema import SamplingConfig

#: Fields that label a request and change no answer (accepted, not used).
LABEL_FIELDS = frozenset({"user", "metadata", "store", "service_tier", "request_id"})


class UnsupportedField(ValueError):
    """A request field `gp serve` cannot honour; ``param`` names it (the 400's ``error.param``)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


class StreamOptions(BaseModel):
    include_usage: bool = False


class _SamplingRequest(BaseModel):
    """Sampling fields shared by both endpoints (OpenAI's, plus vLLM's top_k / repetition_penalty /
    stop_token_ids)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    repetition_penalty: float | None = Field(None, gt=0)
    seed: int | None = None
    n: int = 1
    stream: bool = False
    stream_options: StreamOptions | None = None

    def check_supported(self) -> None:
        """Raise UnsupportedField for the first field this server would otherwise ignore."""
        if self.n != 1:
            raise UnsupportedField("n", f"n={self.n}: gp serve returns one choice per request; send n=1 "
                                        "(or several requests)")
        for name, value in (self.model_extra or {}).items():
            if name in LABEL_FIELDS or value in (None, False, 0, "", [], {}):
                continue
            raise UnsupportedField(name, f"{name}={value!r} is not supported by gp serve (it would be ignored); "
                                         "drop the field")

    def sampling(self, base: SamplingConfig) -> SamplingConfig:
        update: dict[str, Any] = {}
        if self.temperature is not None:
            update["temperature"], update["do_sample"] = self.temperature, self.temperature > 0
        if self.top_p is not None:
            update["top_p"] = self.top_p
        if self.top_k is not None:
            update["top_k"] = max(0, self.top_k)
        if (self.max_completion_tokens or self.max_tokens) is not None:
            update["max_new_tokens"] = self.max_completion_tokens or self.max_tokens
        if self.stop is not None:
            update["stop"] = [self.stop] if isinstance(self.stop, str) else list(self.stop)
        if self.stop_token_ids is not None:
            update["stop_ids"] = list(self.stop_token_ids)
        if self.repetition_penalty is not None:
            update["repetition_penalty"] = self.repetition_penalty
        return base.model_copy(update=update)

    @property
    def requested_max_tokens(self) -> int | None:
        """The completion budget the client asked for (None: none, vLLM then fills the context)."""
        return self.max_completion_tokens or self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatCompletionRequest(_SamplingRequest):
    """`POST /v1/chat/completions`."""

    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["auto", "none"] | None = None


class CompletionRequest(_SamplingRequest):
    """`POST /v1/completions` as vLLM answers it: the prompt is text (already templated by the client, as rLLM's
    engine sends it) or token ids, tokenized with ``add_special_tokens`` (vLLM's default: true)."""

    prompt: str | list[int] | list[str] | list[list[int]]
    add_special_tokens: bool = True
    echo: bool = False

    def check_supported(self) -> None:
        super().check_supported()
        if self.echo:
            raise UnsupportedField("echo", "echo=true is not supported by gp serve; drop the field")

    def prompts(self) -> list[str | list[int]]:
        """One prompt per choice (a list of prompts is a batch, answered with one choice each, as vLLM does)."""
        prompt = self.prompt
        if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
            return [prompt]  # type: ignore[list-item]
        return list(prompt)  # type: ignore[arg-type]


def error_body(message: str, param: str | None = None, kind: str = "invalid_request_error",
               code: int | None = None) -> dict[str, Any]:
    """OpenAI's error shape: the official client raises it with ``error.message`` (BadRequestError, ...)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class ContextLengthExceeded(ValueError):
    """A prompt (plus the completion asked for) over ``--max-model-len``: answered as vLLM answers it."""


def check_context_length(max_model_len: int | None, prompt_tokens: int, max_tokens: int | None) -> None:
    """Raise ContextLengthExceeded in vLLM's words (its ``_validate_input``): prompt + ``max_tokens`` over the
    limit; with no ``max_tokens`` only a prompt that fills the whole context (vLLM then generates up to the limit)."""
    if max_model_len is None:
        return
    limit = f"This model's maximum context length is {max_model_len} tokens. However, you requested "
    if max_tokens is None:
        if prompt_tokens >= max_model_len:
            raise ContextLengthExceeded(f"{limit}{prompt_tokens} tokens in the messages, Please reduce the length "
                                        "of the messages.")
    elif prompt_tokens + max_tokens > max_model_len:
        raise ContextLengthExceeded(f"{limit}{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, "
                                    f"{max_tokens} in the completion). Please reduce the length of the messages "
                                    "or completion.")


def vllm_error_body(message: str, kind: str = "BadRequestError", code: int = 400) -> dict[str, Any]:
    """vLLM's error: its flat ErrorResponse (``"object": "error"``, message, type, param, code) with the same fields
    under ``error`` as well (OpenAI's shape, newer vLLM's and :func:`error_body`'s), so clients of either read it."""
    fields = {"message": message, "type": kind, "param": None, "code": code}
    return {"object": "error", **fields, "error": dict(fields)}


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def chat_completion(model: str, message: dict[str, Any], finish: str, prompt_tokens: int,
                    completion_tokens: int) -> dict[str, Any]:
    return {"id": new_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": _usage(prompt_tokens, completion_tokens)}


def text_completion(model: str, choices: list[dict[str, Any]], prompt_tokens: int,
                    completion_tokens: int) -> dict[str, Any]:
    return {"id": new_id("cmpl"), "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": _usage(prompt_tokens, completion_tokens)}


def _pieces(text: str) -> list[str]:
    """Word-sized pieces whose concatenation is ``text`` (the streamed deltas)."""
    return [p for p in re.findall(r"\s*\S+|\s+", text) if p]


def _sse(data: dict[str, Any] | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


def chat_stream(answer: dict[str, Any], include_usage: bool) -> Iterator[str]:
    """A finished ``chat.completion`` as ``chat.completion.chunk`` server-sent events, as the OpenAI API streams:
    the role, the content in pieces, the tool calls, the finish reason, the usage when asked, ``[DONE]``.
    The answer is generated whole first (HF generate), so chunks arrive together at the end."""
    choice = answer["choices"][0]
    message = choice["message"]
    base = {"id": answer["id"], "object": "chat.completion.chunk", "created": answer["created"],
            "model": answer["model"], **({"usage": None} if include_usage else {})}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(message.get("content") or ""):
        yield chunk({"content": piece})
    if message.get("tool_calls"):
        yield chunk({"tool_calls": [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]})
    yield chunk({}, choice["finish_reason"])
    if include_usage:
        yield _sse({**base, "choices": [], "usage": answer["usage"]})
    yield _sse("[DONE]")


def completion_stream(answer: dict[str, Any], include_usage: bool) -> Iterator[str]:
    """A finished ``text_completion`` as server-sent events (vLLM's stream shape), one choice after another."""
    base = {"id": answer["id"], "object": "text_completion", "created": answer["created"], "model": answer["model"],
            **({"usage": None} if include_usage else {})}
    for choice in answer["choices"]:
        for piece in _pieces(choice["text"]):
            yield _sse({**base, "choices": [{"index": choice["index"], "text": piece, "logprobs": None,
                                             "finish_reason": None}]})
        yield _sse({**base, "choices": [{"index": choice["index"], "text": "", "logprobs": None,
                                         "finish_reason": choice["finish_reason"]}]})
    if include_usage:
        yield _sse({**base, "choices": [], "usage": answer["usage"]})
    yield _sse("[DONE]")
