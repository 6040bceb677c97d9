"""Lockstep rounds for the ``hf`` rollout: the episodes one agent-loop worker plays at once ask the model server
together, one batched ``generate`` per round, instead of one request each.

The hf server (:mod:`graph_planner.training.verl.hf_rollout`) runs ``transformers.generate`` one call at a time;
at toy and small-model sizes a call costs about the same for 1 or 32 prompts, and a verl step sends ~160 of them
(measured 2026-11-28: 22.7 s of a 34.3 s step was the rollout). The rule is the local engine's
(:mod:`graph_planner.training.local.batched_generation`): when every member still playing waits for its next
generation, all of them are answered by ONE request in member order. A round's make-up is fixed by which members
are still playing, never by timing, so a seeded run draws the same tokens every time ("same seed, same curve"):
members join in verl's batch order (an episode joins in the first, synchronous, step of its coroutine, right after
it takes its sandbox slot without waiting) and the round's seed is derived from its members' own request seeds.

Where sandbox slots are scarcer than a worker's episodes (``parallel.workflow_parallel`` below the batch), an
episode joins once it gets its slot (it must not hold up rounds while waiting for a slot another member holds), so
the make-up then depends on when slots free up; the run is still correct, only no longer bit-reproducible.

The batch travels through verl's own server client (load balancing, sticky routing) as one ``generate`` call whose
``batch`` keyword lists every row; the server answers each row in ``extra_fields["batch"]``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

#: Sampling keys that may differ between the rows of one batched call (everything else must match).
PER_ROW_KEYS = ("seed", "max_tokens")
#: ``sampling_params`` key carrying the batch's rows to the hf server (and ``extra_fields`` key of its answers).
BATCH_KEY = "batch"


def round_seed(seeds: list[int | None]) -> int | None:
    """The seed of one batched call: 31 bits of sha256 of its rows' seeds in member order (None: unseeded)."""
    if any(s is None for s in seeds):
        return None
    digest = hashlib.sha256(",".join(str(s) for s in seeds).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


@dataclass
class _Request:
    request_id: str
    prompt_ids: list[int]
    sampling_params: dict[str, Any]
    answer: asyncio.Future = field(repr=False)


Send = Callable[..., Awaitable[Any]]  # verl's LLMServerClient.generate(request_id, prompt_ids=, sampling_params=)


class LockstepRounds:
    """The members playing in one event loop (one agent-loop worker) and their pending generations."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self._joined = 0
        self._playing: set[int] = set()
        self._pending: dict[int, _Request] = {}
        self._check_scheduled = False

    def join(self) -> int:
        """A new member (synchronous: call it before the episode's first await that can suspend)."""
        member = self._joined
        self._joined += 1
        self._playing.add(member)
        return member

    def leave(self, member: int) -> None:
        """The member is done (finished, failed or cancelled): later rounds no longer wait for it."""
        self._playing.discard(member)
        request = self._pending.pop(member, None)
        if request is not None and not request.answer.done():
            request.answer.cancel()
        self._check_soon()

    async def generate(self, member: int, request_id: str, prompt_ids: list[int],
                       sampling_params: dict[str, Any]) -> Any:
        """The member's next generation (a verl ``TokenOutput``): waits for its round."""
        if member not in self._playing:
            raise RuntimeError(f"lockstep member {member} has left and cannot generate")
        if member in self._pending:
            raise RuntimeError(f"lockstep member {member} already waits for a generation")
        answer = asyncio.get_running_loop().create_future()
        self._pending[member] = _Request(request_id, list(prompt_ids), dict(sampling_params), answer)
        self._check_soon()
        try:
            return await answer
        finally:
            request = self._pending.get(member)
            if request is not None and request.answer is answer:  # cancelled before its round was sent
                del self._pending[member]

    def _check_soon(self) -> None:
        """Check the round after the coroutines already scheduled have run their step: episodes that verl started
        together have all joined by then, even one that asks for its first generation without suspending."""
        if self._check_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a leave from outside the loop (its shutdown): nothing is left to wait
            return
        self._check_scheduled = True
        loop.call_soon(self._send_if_complete)

    def _send_if_complete(self) -> None:
        self._check_scheduled = False
        if not self._pending or set(self._pending) != self._playing:
            return
        order = sorted(self._pending)
        requests = [self._pending.pop(m) for m in order]
        groups: dict[str, list[_Request]] = {}
        for request in requests:  # rows must share every sampling setting but their seed and token budget
            shared = {k: v for k, v in request.sampling_params.items() if k not in PER_ROW_KEYS}
            groups.setdefault(json.dumps(shared, sort_keys=True, default=str), []).append(request)
        for group in groups.values():
            task = asyncio.ensure_future(self._send_group(group))
            _IN_FLIGHT.add(task)
            task.add_done_callback(_IN_FLIGHT.discard)

    async def _send_group(self, group: list[_Request]) -> None:
        first = group[0]
        rows = [{"request_id": r.request_id, "prompt_ids": r.prompt_ids,
                 "max_tokens": r.sampling_params.get("max_tokens"), "seed": r.sampling_params.get("seed")}
                for r in group]
        params = {**first.sampling_params, "seed": round_seed([row["seed"] for row in rows]),
                  "max_tokens": max(int(row["max_tokens"] or 0) for row in rows) or None, BATCH_KEY: rows}
        try:
            out = await self.send(first.request_id, prompt_ids=first.prompt_ids, sampling_params=params)
            answers = split_batch_output(out, len(group))
        except BaseException as exc:  # noqa: BLE001 - every member of the call sees the failure
            for request in group:
                if not request.answer.done():
                    request.answer.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, Exception):
                raise
            return
        for request, answer in zip(group, answers):
            if not request.answer.done():
                request.answer.set_result(answer)


#: Round calls in flight (asyncio keeps only weak references to tasks).
_IN_FLIGHT: set[asyncio.Future] = set()


def split_batch_output(out: Any, rows: int) -> list[Any]:
    """One ``TokenOutput`` per row of a batched answer (the server's ``extra_fields["batch"]``)."""
    from verl.workers.rollout.replica import TokenOutput

    answers = (out.extra_fields or {}).get(BATCH_KEY)
    if not isinstance(answers, list) or len(answers) != rows:
        raise RuntimeError(f"the rollout server answered a batched request of {rows} rows with "
                           f"{'no batch' if not isinstance(answers, list) else f'{len(answers)} rows'}: it is not "
                           "the project's hf rollout (training.rollout_engine: hf)")
    extra = {k: v for k, v in (out.extra_fields or {}).items() if k != BATCH_KEY}
    return [TokenOutput(token_ids=a["token_ids"], log_probs=a.get("log_probs"), stop_reason=out.stop_reason,
                        num_preempted=out.num_preempted, extra_fields=dict(extra)) for a in answers]


_ROUNDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LockstepRounds] = weakref.WeakKeyDictionary()


def rounds_for(send: Send) -> LockstepRounds:
    """The worker's rounds (one per running event loop: an agent-loop worker runs all its episodes in one)."""
    loop = asyncio.get_running_loop()
    rounds = _ROUNDS.get(loop)
    if rounds is None:
        rounds = _ROUNDS[loop] = LockstepRounds(send)
    return rounds
