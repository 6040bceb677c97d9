"""`gp serve`: a small HTTP server over a local HF checkpoint with the two endpoints the pipeline calls,
`/v1/chat/completions` (OpenAI shape, usage included, ``stream`` as server-sent events), `/v1/completions` (as
vLLM answers it: rLLM's OpenAI engine sends its own templated prompt there) and the CGM `/generate`, so the HTTP
clients are tested for real on loopback and users can debug a planner or synthesiser without vLLM.

Prompt bounds, on all three routes: ``--max-prompt-tokens`` cuts each prompt to its last N tokens with training's
cut (:func:`graph_planner.models.chat.cut_prompt`), then a prompt whose tokens plus the completion asked for exceed
``--max-model-len`` is a 400 in vLLM's words and error shape, as the vLLM server the pipeline otherwise calls."""

from __future__ import annotations

import threading
from typing import Annotated, Any

import typer

from graph_planner.config.schema import CGMGenerationConfig, SamplingConfig
from graph_planner.episode.patch import RepairRequest
from graph_planner.models.chat import HFChatModel, finish_reason
from graph_planner.models.openai_protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    ContextLengthExceeded,
    UnsupportedField,
    chat_completion,
    chat_stream,
    check_context_length,
    completion_stream,
    error_body,
    text_completion,
    vllm_error_body,
)
from graph_planner.models.synthesizers import proposal_from_text, synthesis_messages


def create_app(chat: HFChatModel, model_name: str, generation: CGMGenerationConfig | None = None,
               max_model_len: int | None = None) -> Any:
    """The FastAPI app; generation is serialised with a lock (one model, one request at a time). The OpenAI routes
    answer errors in OpenAI's shape (``{"error": {"message", "param", ...}}``, 400 for a bad or unsupported
    field) so the official client raises them with the message. Prompts are cut to ``chat.max_prompt_tokens``;
    ``max_model_len`` (default: the model's context length) bounds prompt + completion on every route."""
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI(title="graph-planner serve", version="1")
    lock = threading.Lock()
    default_generation = generation or CGMGenerationConfig()
    tokenizer = chat.tokenizer
    context = max_model_len if max_model_len is not None else chat.context_length()

    def bounded(prompt_tokens: int, requested: int | None, sampling: SamplingConfig) -> SamplingConfig:
        """The sampling of a prompt that fits (ContextLengthExceeded otherwise); with no completion budget asked
        for, generation stops at the context's end, as vLLM's does."""
        check_context_length(context, prompt_tokens, requested)
        if requested is None and context is not None and prompt_tokens + sampling.max_new_tokens > context:
            return sampling.model_copy(update={"max_new_tokens": context - prompt_tokens})
        return sampling

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(part) for part in first.get("loc", ()) if part != "body"]
        field = ".".join(loc) or None
        message = f"{field}: {first.get('msg', 'invalid request')}" if field else str(first.get("msg", exc))
        if not request.url.path.startswith("/v1/"):
            return JSONResponse(status_code=422, content={"detail": exc.errors()})
        return JSONResponse(status_code=400, content=error_body(message, field, code=400))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if not request.url.path.startswith("/v1/"):
            return JSONResponse(status_code=exc.status_code, content={"detail": exc.detail})
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return JSONResponse(status_code=exc.status_code, content=error_body(str(exc.detail), kind=kind,
                                                                            code=exc.status_code))

    def checked(req: Any) -> SamplingConfig:
        if req.model and req.model != model_name:
            raise HTTPException(404, f"model {req.model!r} is not served here; this server serves {model_name!r}")
        req.check_supported()  # UnsupportedField -> 400 naming the field (below)
        return req.sampling(chat.sampling)

    @app.exception_handler(UnsupportedField)
    async def unsupported(request: Request, exc: UnsupportedField) -> JSONResponse:
        return JSONResponse(status_code=400, content=error_body(str(exc), exc.param, code=400))

    @app.exception_handler(ContextLengthExceeded)
    async def too_long(request: Request, exc: ContextLengthExceeded) -> JSONResponse:
        return JSONResponse(status_code=400, content=vllm_error_body(str(exc)))  # every route, /generate too

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "model": model_name}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "graph-planner"}]}

    @app.post("/v1/chat/completions")
    def chat_completions(req: ChatCompletionRequest) -> Any:
        sampling = checked(req)
        tools = None if req.tool_choice == "none" else req.tools
        with lock:
            ids = chat.cut(chat.prompt_ids(req.messages, tools))
            sampling = bounded(len(ids), req.requested_max_tokens, sampling)
            if req.seed is not None:
                chat._torch.manual_seed(req.seed)
            response = chat.respond(ids, sampling)
        message: dict[str, Any] = {"role": "assistant", "content": response.text or None}
        if response.tool_calls:
            message["tool_calls"] = response.tool_calls
        finish = "tool_calls" if response.tool_calls else response.finish_reason
        answer = chat_completion(model_name, message, finish, response.prompt_tokens, response.completion_tokens)
        if req.stream:
            return StreamingResponse(chat_stream(answer, req.include_usage), media_type="text/event-stream")
        return answer

    @app.post("/v1/completions")
    def completions(req: CompletionRequest) -> Any:
        sampling = checked(req)
        choices, prompt_tokens, completion_tokens = [], 0, 0
        with lock:
            batch = [chat.cut(chat.prompt_ids(p, add_special_tokens=req.add_special_tokens)) for p in req.prompts()]
            samplings = [bounded(len(ids), req.requested_max_tokens, sampling) for ids in batch]  # all, or none
            if req.seed is not None:
                chat._torch.manual_seed(req.seed)
            for index, (ids, each) in enumerate(zip(batch, samplings)):
                response_ids, _ = chat.generate_ids(ids, each)
                choices.append({"index": index, "text": tokenizer.decode(response_ids, skip_special_tokens=True),
                                "logprobs": None, "stop_reason": None,
                                "finish_reason": finish_reason(response_ids, tokenizer.eos_token_id,
                                                         each.max_new_tokens)})
                prompt_tokens += len(ids)
                completion_tokens += len(response_ids)
        answer = text_completion(model_name, choices, prompt_tokens, completion_tokens)
        if req.stream:
            return StreamingResponse(completion_stream(answer, req.include_usage), media_type="text/event-stream")
        return answer

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
            ids = chat.cut(chat.encode_chat(synthesis_messages(request)))
            response = chat.respond(ids, bounded(len(ids), sampling.max_new_tokens, sampling))
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
    max_prompt_tokens: Annotated[int | None, typer.Option(
        "--max-prompt-tokens", min=1, metavar="N",
        help="Cut each prompt to its last N tokens, as training cuts them (training.max_prompt_length).")] = None,
    max_model_len: Annotated[int | None, typer.Option(
        "--max-model-len", min=1, metavar="L",
        help="Refuse (400, vLLM's message) a prompt whose tokens + max_tokens exceed L; default: the model's "
             "max_position_embeddings.")] = None,
) -> None:
    """Serve a local checkpoint as /v1/chat/completions, /v1/completions and the CGM /generate endpoint (debugging
    without vLLM)."""
    import uvicorn

    from graph_planner.models.toy import resolve_model_path

    path = resolve_model_path(model, cache_dir)
    try:
        device_map: str | list[int] = [int(g) for g in gpus.split(",")] if gpus else "auto"
    except ValueError:
        raise typer.BadParameter(f"--gpus {gpus!r}: expected GPU indices like 4,5,6,7") from None
    chat = HFChatModel(path, dtype=dtype, device_map=device_map, max_prompt_tokens=max_prompt_tokens,
                       prompt_budget_setting="--max-prompt-tokens")
    name = served_model_name or model
    typer.echo(f"serving {path} as {name!r} on http://{host}:{port} (/v1/chat/completions, /v1/completions, "
               "/generate)", err=True)
    uvicorn.run(create_app(chat, name, max_model_len=max_model_len), host=host, port=port, log_level="info")
