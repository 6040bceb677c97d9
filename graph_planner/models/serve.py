"""`gp serve`: a small HTTP server over a local HF checkpoint with the two endpoints the pipeline calls,
`/v1/chat/completions` (OpenAI shape, usage included) and the CGM `/generate`, so the HTTP clients are tested for
real on loopback and users can debug a planner or synthesiser without vLLM."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ConfigDict, Field

from graph_planner.config.schema import CGMGenerationConfig, SamplingConfig
from graph_planner.episode.patch import RepairRequest
from graph_planner.models.chat import HFChatModel
from graph_planner.models.synthesizers import proposal_from_text, synthesis_messages


class ChatCompletionRequest(BaseModel):
    """The OpenAI request fields this server honours (others, e.g. `logprobs`, are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1)
    max_tokens: int | None = Field(None, ge=1)
    stop: list[str] | str | None = None
    repetition_penalty: float | None = Field(None, gt=0)
    n: int = Field(1, ge=1, le=1, description="One choice per request.")


def _sampling(base: SamplingConfig, req: ChatCompletionRequest) -> SamplingConfig:
    update: dict[str, Any] = {}
    if req.temperature is not None:
        update["temperature"], update["do_sample"] = req.temperature, req.temperature > 0
    if req.top_p is not None:
        update["top_p"] = req.top_p
    if req.top_k is not None:
        update["top_k"] = max(0, req.top_k)
    if req.max_tokens is not None:
        update["max_new_tokens"] = req.max_tokens
    if req.stop is not None:
        update["stop"] = [req.stop] if isinstance(req.stop, str) else list(req.stop)
    if req.repetition_penalty is not None:
        update["repetition_penalty"] = req.repetition_penalty
    return base.model_copy(update=update)


def create_app(chat: HFChatModel, model_name: str, generation: CGMGenerationConfig | None = None) -> Any:
    """The FastAPI app; generation is serialised with a lock (one model, one request at a time)."""
    from fastapi import FastAPI, HTTPException

    app = FastAPI(title="graph-planner serve", version="1")
    lock = threading.Lock()
    default_generation = generation or CGMGenerationConfig()

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "model": model_name}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "graph-planner"}]}

    @app.post("/v1/chat/completions")
    def chat_completions(req: ChatCompletionRequest) -> dict[str, Any]:
        if req.model and req.model != model_name:
            raise HTTPException(404, f"model {req.model!r} is not served here; this server serves {model_name!r}")
        with lock:
            response = chat.chat(req.messages, tools=req.tools, sampling=_sampling(chat.sampling, req))
        message: dict[str, Any] = {"role": "assistant", "content": response.text or None}
        if response.tool_calls:
            message["tool_calls"] = response.tool_calls
        finish = "tool_calls" if response.tool_calls else response.finish_reason
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": response.prompt_tokens, "completion_tokens": response.completion_tokens,
                      "total_tokens": response.prompt_tokens + response.completion_tokens},
        }

    @app.post("/generate")
    def generate(body: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(body.get("issue"), str) or not isinstance(body.get("plan"), str):
            raise HTTPException(422, "a CGM request needs 'issue' and 'plan' strings (plus graph, snippets, ...)")
        request = RepairRequest.from_json(body)
        overrides = body.get("generation") or {}
        try:
            sampling = default_generation.model_copy(update=CGMGenerationConfig(**overrides).model_dump(
                exclude_unset=True))
        except ValueError as exc:
            raise HTTPException(422, f"generation: {exc}") from None
        with lock:
            response = chat.chat(synthesis_messages(request), sampling=sampling)
        proposal = proposal_from_text(response.text)
        return {
            "edits": [e.to_dict() for e in proposal.edits] if proposal.edits else None,
            "diff": proposal.diff, "raw": response.text, "error": proposal.error,
            "usage": {"prompt_tokens": response.prompt_tokens, "completion_tokens": response.completion_tokens},
        }

    return app


def serve_cmd(
    model: Annotated[str, typer.Option("--model", help="HF checkpoint dir or hub id; 'toy' = the built-in toy LM.")],
    host: Annotated[str, typer.Option("--host", help="Interface to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    served_model_name: Annotated[str | None, typer.Option("--served-model-name",
                                                             help="Name clients send as 'model'.")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="float32 | bfloat16 | float16 | auto")] = "float32",
    cache_dir: Annotated[str, typer.Option("--cache-dir", help="Where the toy checkpoint is built.")]
    = ".cache/graph_planner",
    gpus: Annotated[str | None, typer.Option(
        "--gpus", help="Pin the model to these GPUs, e.g. 4,5,6,7 (a preset's backends.device_map_cgm).")] = None,
) -> None:
    """Serve a local checkpoint as /v1/chat/completions and the CGM /generate endpoint (debugging without vLLM)."""
    import uvicorn

    from graph_planner.models.toy import resolve_model_path

    path = resolve_model_path(model, cache_dir)
    try:
        device_map: str | list[int] = [int(g) for g in gpus.split(",")] if gpus else "auto"
    except ValueError:
        raise typer.BadParameter(f"--gpus {gpus!r}: expected GPU indices like 4,5,6,7") from None
    chat = HFChatModel(path, dtype=dtype, device_map=device_map)
    name = served_model_name or model
    typer.echo(f"serving {path} as {name!r} on http://{host}:{port} (/v1/chat/completions, /generate)", err=True)
    uvicorn.run(create_app(chat, name), host=host, port=port, log_level="info")
