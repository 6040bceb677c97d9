"""The toy checkpoint: a real HF model dir built here, loaded through the ordinary Auto* path, cached by params."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from graph_planner.models.toy import create_toy_checkpoint, ensure_toy_checkpoint, resolve_model_path


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("toy-cache")


def test_loads_with_auto_classes_and_chat_template(cache):
    path = ensure_toy_checkpoint(cache)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": "Repair the repo."}, {"role": "user", "content": "add() is wrong"}],
        add_generation_prompt=True, tokenize=False)
    assert text == "<|system|>\nRepair the repo.<|end|>\n<|user|>\nadd() is wrong<|end|>\n<|assistant|>\n"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_tokens_to_ids("<|assistant|>") in ids  # role tags are single special tokens
    assert tokenizer.eos_token == "<|end|>" and tokenizer.pad_token_id is not None
    action = '{"name": "explore_find", "arguments": {"query": "add"}}'
    assert tokenizer.decode(tokenizer(action)["input_ids"]) == action  # byte-level BPE round-trips
    out = model.generate(torch.tensor([ids]), max_new_tokens=4, do_sample=False,
                         pad_token_id=tokenizer.pad_token_id)
    assert out.shape[1] > len(ids)
    assert model.config.vocab_size == len(tokenizer)


def test_cache_reuses_by_parameters(cache):
    first = ensure_toy_checkpoint(cache)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert ensure_toy_checkpoint(cache) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt
    other = ensure_toy_checkpoint(cache, seed=1)
    assert other != first
    w0 = AutoModelForCausalLM.from_pretrained(first).model.embed_tokens.weight
    w1 = AutoModelForCausalLM.from_pretrained(other).model.embed_tokens.weight
    assert not torch.equal(w0, w1)
    assert resolve_model_path("toy", cache) == str(first)
    assert resolve_model_path("Qwen/Qwen3-14B", cache) == "Qwen/Qwen3-14B"


def test_same_seed_same_weights_and_refuses_non_empty_dir(tmp_path):
    a = create_toy_checkpoint(tmp_path / "a", seed=3, hidden=32, layers=1)
    b = create_toy_checkpoint(tmp_path / "b", seed=3, hidden=32, layers=1)
    wa = AutoModelForCausalLM.from_pretrained(a).state_dict()
    wb = AutoModelForCausalLM.from_pretrained(b).state_dict()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    with pytest.raises(FileExistsError, match="not empty"):
        create_toy_checkpoint(a)
