"""The policy as rollouts see it during local GRPO training: an HF causal LM behind `generate`, returning token
ids and the log-probs the trainer recomputes (so the PPO ratio starts at 1)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch

from graph_planner.config.schema import SamplingConfig
from graph_planner.models.chat import cut_prompt


class Generation(NamedTuple):
    text: str
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]


def sampling_temperature(sampling: SamplingConfig) -> float:
    """The temperature the policy's log-probs are taken at (verl divides logits by it; greedy counts as 1)."""
    return sampling.temperature if sampling.do_sample and sampling.temperature > 0 else 1.0


class PolicyHandle:
    """What a rollout needs from the policy being trained: generation that returns token ids and log-probs.

    Log-probs are of the sampled tokens under the policy at the sampling temperature (logits / T, no top-p/k),
    the quantity the trainer recomputes, so the PPO ratio starts at 1. Prompts longer than
    ``max_prompt_length`` keep their last tokens (a warning is logged); responses stop at
    ``max_response_length`` tokens.
    """

    def __init__(self, model: Any, tokenizer: Any, max_prompt_length: int, max_response_length: int,
                 autocast: Callable[[], contextlib.AbstractContextManager] | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_prompt_length = max_prompt_length
        self.max_response_length = max_response_length
        self._autocast = autocast or contextlib.nullcontext
        self.truncated_prompts = 0  # prompts cut to max_prompt_length since the trainer last read it

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode(self, messages_or_prompt_ids: Sequence[dict[str, Any]] | Sequence[int]) -> list[int]:
        """Chat messages -> ids through the tokenizer's chat template (with the generation prompt); ids pass."""
        items = list(messages_or_prompt_ids)
        if items and isinstance(items[0], dict):
            text = self.tokenizer.apply_chat_template(items, add_generation_prompt=True, tokenize=False)
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return [int(i) for i in items]

    def generate(self, messages_or_prompt_ids: Sequence[dict[str, Any]] | Sequence[int],
                 sampling: SamplingConfig) -> Generation:
        """One response: (text, prompt_ids, response_ids, logprobs)."""
        return self.generate_n(messages_or_prompt_ids, sampling, 1)[0]

    def generate_n(self, messages_or_prompt_ids: Sequence[dict[str, Any]] | Sequence[int],
                   sampling: SamplingConfig, n: int) -> list[Generation]:
        """``n`` responses to one prompt (a GRPO group)."""
        return self.generate_batch([messages_or_prompt_ids], sampling, n)[0]

    def finish_reason(self, response_ids: Sequence[int], sampling: SamplingConfig) -> str:
        """"length" when a response used its whole token budget without a stop token (it was clipped)."""
        stop_ids = {self.tokenizer.eos_token_id, *sampling.stop_ids}
        budget = min(sampling.max_new_tokens, self.max_response_length)
        ended = bool(response_ids) and response_ids[-1] in stop_ids
        return "stop" if ended or len(response_ids) < budget else "length"

    @torch.no_grad()
    def generate_batch(self, prompts: Sequence[Sequence[dict[str, Any]] | Sequence[int]],
                       sampling: SamplingConfig, n: int = 1) -> list[list[Generation]]:
        """``n`` responses to each prompt in one left-padded ``generate`` call; one list per prompt."""
        encoded = []
        for prompt in prompts:
            ids, cut = cut_prompt(self.encode(prompt), self.max_prompt_length, self.truncated_prompts,
                                  "training.max_prompt_length; counted in rollout/truncated_prompts")
            self.truncated_prompts += cut
            encoded.append(ids)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        width = max(len(ids) for ids in encoded)
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in encoded], device=self.device)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in encoded], device=self.device)
        do_sample = sampling.do_sample and sampling.temperature > 0
        stop_ids = {self.tokenizer.eos_token_id, *sampling.stop_ids}
        kwargs: dict[str, Any] = {
            "max_new_tokens": min(sampling.max_new_tokens, self.max_response_length),
            "do_sample": do_sample, "repetition_penalty": sampling.repetition_penalty,
            "eos_token_id": sorted(stop_ids), "pad_token_id": pad,
            "num_return_sequences": n, "output_logits": True, "return_dict_in_generate": True, "use_cache": True,
        }
        if do_sample:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k)
        if sampling.stop:
            kwargs.update(stop_strings=list(sampling.stop), tokenizer=self.tokenizer)
        was_training = self.model.training
        self.model.eval()
        try:
            with self._autocast():
                out = self.model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
        finally:
            self.model.train(was_training)
        responses = out.sequences[:, width:]
        temperature = sampling_temperature(sampling)
        logprobs = torch.stack([  # per generated position: log p(token) under logits / T
            torch.log_softmax(step.float() / temperature, dim=-1).gather(-1, responses[:, k: k + 1]).squeeze(-1)
            for k, step in enumerate(out.logits)], dim=1)
        results: list[list[Generation]] = [[] for _ in encoded]
        for r, (row, row_logprobs) in enumerate(zip(responses.tolist(), logprobs.tolist())):
            length = _response_length(row, stop_ids, pad)
            text = self.tokenizer.decode(row[:length], skip_special_tokens=True)
            results[r // n].append(Generation(text, list(encoded[r // n]), row[:length], row_logprobs[:length]))
        return results


def _response_length(row: list[int], stop_ids: set[int], pad_id: int | None) -> int:
    """Tokens up to and including the first stop token; without one, minus the batch's trailing padding."""
    for i, token in enumerate(row):
        if token in stop_ids:
            return i + 1
    length = len(row)
    while pad_id is not None and length > 0 and row[length - 1] == pad_id:
        length -= 1
    return length
