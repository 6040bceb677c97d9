"""`gp serve --max-prompt-tokens N --max-model-len L`: prompts cut to their last N tokens by training's cut, and a
prompt + max_tokens over L answered with vLLM's 400 on /v1/chat/completions, /v1/completions and /generate. The
server is built by the real `gp serve` command (uvicorn.run intercepted) and called with the official openai
client."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from serve_fixtures import serving

from graph_planner.config.schema import SamplingConfig
from graph_planner.models.chat import HFChatModel
from graph_planner.models.serve import create_app
from graph_planner.models.toy import resolve_model_path

openai = pytest.importorskip("openai")  # a dev dependency (pyproject.toml [dev])

N, L = 32, 64
LONG = [{"role": "system", "content": "You fix bugs. " * 40}, {"role": "user", "content": "find truncate"}]


def vllm_message(prompt: int, completion: int, limit: int = L) -> str:
    return (f"This model's maximum context length is {limit} tokens. However, you requested {prompt + completion} "
            f"tokens ({prompt} in the messages, {completion} in the completion). Please reduce the length of the "
            "messages or completion.")


@pytest.fixture(scope="module")
def toy_chat(shared_model_cache):
    return HFChatModel(resolve_model_path("toy", shared_model_cache), sampling=SamplingConfig(do_sample=False),
                       seed=0)


@pytest.fixture(scope="module")
def served(shared_model_cache):
    """`gp serve --model toy --max-prompt-tokens 32 --max-model-len 64`'s app on loopback; yields its base URL."""
    import uvicorn
    from typer.testing import CliRunner

    from graph_planner.cli import app

    captured: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(uvicorn, "run", lambda asgi, **kwargs: captured.update(app=asgi))
        result = CliRunner().invoke(app, ["serve", "--model", "toy", "--cache-dir", str(shared_model_cache),
                                          "--max-prompt-tokens", str(N), "--max-model-len", str(L)])
    assert result.exit_code == 0, result.output
    with serving(captured["app"]) as url:
        yield url


@pytest.fixture(scope="module")
def client(served):
    client = openai.OpenAI(base_url=f"{served}/v1", api_key="unused", max_retries=0)
    yield client
    client.close()


def test_gp_serve_help_shows_the_prompt_bounds():
    from typer.testing import CliRunner

    from graph_planner.cli import app

    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0
    assert "--max-prompt-tokens" in result.output and "--max-model-len" in result.output


def test_long_prompts_are_cut_to_their_last_n_tokens_on_every_route(client, served, toy_chat):
    full = toy_chat.encode_chat(LONG)
    assert len(full) > N
    chat = client.chat.completions.create(model="toy", messages=LONG, max_tokens=4, temperature=0)
    assert chat.usage.prompt_tokens == N
    text = toy_chat.tokenizer.apply_chat_template(LONG, add_generation_prompt=True, tokenize=False)
    done = client.completions.create(model="toy", prompt=text, max_tokens=4, temperature=0)
    assert done.usage.prompt_tokens == N  # uncut before: the whole text
    by_ids = client.completions.create(model="toy", prompt=full, max_tokens=4, temperature=0)
    assert by_ids.usage.prompt_tokens == N
    assert by_ids.choices[0].text == client.completions.create(model="toy", prompt=full[-N:], max_tokens=4,
                                                               temperature=0).choices[0].text  # the last N
    cgm = httpx.post(f"{served}/generate", json={"issue": "x " * 200, "plan": "y",
                                                 "generation": {"max_new_tokens": 4, "do_sample": False}})
    assert cgm.status_code == 200 and cgm.json()["usage"]["prompt_tokens"] == N


def test_prompt_plus_max_tokens_over_max_model_len_is_vllms_400_on_every_route(client, served, toy_chat):
    over = L - N + 1
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model="toy", messages=LONG, max_tokens=over)
    assert exc.value.status_code == 400 and exc.value.body["message"] == vllm_message(N, over)
    assert exc.value.type == "BadRequestError" and exc.value.body["code"] == 400 and exc.value.param is None
    with pytest.raises(openai.BadRequestError) as exc:
        client.completions.create(model="toy", prompt=[[1, 2, 3], toy_chat.encode_chat(LONG)], max_tokens=over)
    assert exc.value.body["message"] == vllm_message(N, over)  # one prompt of the batch over: the request is refused
    raw = httpx.post(f"{served}/v1/chat/completions", json={"messages": LONG, "max_tokens": over})
    body = raw.json()
    assert raw.status_code == 400
    assert {k: body[k] for k in ("object", "message", "type", "param", "code")} == {
        "object": "error", "message": vllm_message(N, over), "type": "BadRequestError", "param": None, "code": 400}
    cgm = httpx.post(f"{served}/generate", json={"issue": "x " * 200, "plan": "y",
                                                 "generation": {"max_new_tokens": over}})
    assert cgm.status_code == 400 and cgm.json()["message"] == vllm_message(N, over)
    fits = client.chat.completions.create(model="toy", messages=LONG, max_tokens=L - N, temperature=0)
    assert fits.usage.prompt_tokens == N


def test_without_max_tokens_generation_stops_at_the_context_end(client):
    answer = client.chat.completions.create(model="toy", messages=LONG, temperature=0)  # server default: 512
    assert answer.usage.prompt_tokens == N and 0 < answer.usage.completion_tokens <= L - N


def test_max_model_len_defaults_to_the_models_max_position_embeddings(toy_chat):
    limit = toy_chat.model.config.max_position_embeddings
    assert toy_chat.context_length() == limit
    ids = toy_chat.encode_chat(LONG)
    with serving(create_app(toy_chat, "toy")) as url:
        raw = httpx.post(f"{url}/v1/completions", json={"prompt": ids, "max_tokens": limit - len(ids) + 1})
    assert raw.status_code == 400 and raw.json()["message"] == vllm_message(len(ids), limit - len(ids) + 1, limit)


def test_hf_chat_model_prompt_ids_and_cut_reuse_trainings_cut(toy_chat, caplog):
    text = toy_chat.tokenizer.apply_chat_template(LONG, add_generation_prompt=True, tokenize=False)
    ids = toy_chat.encode_chat(LONG)
    assert toy_chat.prompt_ids(LONG) == ids == toy_chat.prompt_ids(text, add_special_tokens=False)
    assert toy_chat.prompt_ids(ids) == ids
    model = HFChatModel(toy_chat.model_path, model=toy_chat.model, tokenizer=toy_chat.tokenizer,
                        max_prompt_tokens=N, prompt_budget_setting="--max-prompt-tokens")
    with caplog.at_level(logging.DEBUG, logger="graph_planner.models.chat"):
        assert model.cut(ids) == ids[-N:] and model.cut(ids) == ids[-N:] and model.cut(ids, 8) == ids[-8:]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "--max-prompt-tokens" in warnings[0].getMessage()
    assert model.truncated_prompts == 3 and toy_chat.cut(ids) == ids  # no budget: uncut
