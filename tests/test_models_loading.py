"""Models load and build one at a time (graph_planner/models/loading.py): concurrent ``from_pretrained`` calls can
leave transformers' weight init and tying switched off for the whole process, and a toy built afterwards came out
with an untied, random LM head (found in CI: the same seeded demo then trained differently)."""

from __future__ import annotations

import threading

import pytest
from transformers import PreTrainedModel

from graph_planner.models.loading import load_causal_lm
from graph_planner.models.toy import (
    _build_model,
    _build_problem,
    _train_tokenizer,
    default_corpus,
    ensure_toy_checkpoint,
)


@pytest.fixture(scope="module")
def toy(shared_model_cache):
    return ensure_toy_checkpoint(shared_model_cache)  # the session's toy, built once for the suite


def test_threads_loading_at_once_leave_later_builds_tied_and_initialised(toy):
    tie, init = PreTrainedModel.tie_weights, PreTrainedModel.init_weights
    errors: list[BaseException] = []

    def load() -> None:
        try:
            for _ in range(5):
                load_causal_lm(str(toy))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    tokenizer = _train_tokenizer(default_corpus(), 1024)
    during = _build_model(tokenizer, 64, 2, 0)  # built while the loads run
    for t in threads:
        t.join()
    assert not errors
    assert PreTrainedModel.tie_weights is tie and PreTrainedModel.init_weights is init  # nothing left switched off
    after = _build_model(tokenizer, 64, 2, 0)
    assert _build_problem(during, 0.02) is None and _build_problem(after, 0.02) is None
    assert all(p.equal(q) for p, q in zip(during.state_dict().values(), after.state_dict().values()))


def test_a_model_built_with_tying_switched_off_is_refused(monkeypatch):
    monkeypatch.setattr(PreTrainedModel, "tie_weights", lambda self, *a, **k: None)
    with pytest.raises(RuntimeError, match="not tied"):
        _build_model(_train_tokenizer(default_corpus(), 1024), 64, 2, 0)
