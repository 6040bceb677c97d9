"""Concurrent episodes, one batched ``generate``: the lockstep batcher behind local GRPO's parallel rollouts.

``parallel.parallel_agents`` episodes play at once, each in its own thread and sandbox (their test runs and git
calls overlap). When every episode still playing has asked the policy for its next action, the batcher answers all
of them with ONE left-padded ``generate_batch`` call, in member order. At toy and small-model sizes a generate
call costs about the same for 1 or 32 prompts, so a round of N episodes costs one call instead of N.

The batch of each round is fixed by which members are still playing, never by thread timing, so a seeded run
samples the same tokens every time (the order of the RNG draws is the members' order).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from graph_planner.config.schema import SamplingConfig


class GenerationBatcher:
    """Lockstep rounds over ``members`` threads sharing one policy handle (``generate_batch``)."""

    def __init__(self, handle: Any, members: int) -> None:
        self.handle = handle
        self._cond = threading.Condition()
        self._playing = set(range(members))
        self._pending: dict[int, tuple[Any, SamplingConfig]] = {}
        self._answers: dict[int, Any] = {}

    def member(self, index: int) -> MemberHandle:
        """The handle member ``index`` generates through (a GenerationHandle, as PolicyHandleChat expects)."""
        return MemberHandle(self, index)

    def generate(self, index: int, prompt: Sequence[Any], sampling: SamplingConfig) -> Any:
        """Member ``index``'s next generation: waits for the round, returns its ``Generation``."""
        with self._cond:
            if index not in self._playing:
                raise RuntimeError(f"member {index} has left the batch and cannot generate")
            self._pending[index] = (prompt, sampling)
            self._run_round_if_complete()
            while index not in self._answers:
                self._cond.wait()
            answer = self._answers.pop(index)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def leave(self, index: int) -> None:
        """Member ``index`` is done (finished or failed): later rounds no longer wait for it."""
        with self._cond:
            self._playing.discard(index)
            self._pending.pop(index, None)
            self._run_round_if_complete()

    def _run_round_if_complete(self) -> None:
        """Called under the lock: when every playing member waits, generate for all of them in member order.
        Generation runs under the lock; no member can act meanwhile anyway (they all wait for this round)."""
        if not self._pending or set(self._pending) != self._playing:
            return
        order = sorted(self._pending)
        requests = {i: self._pending.pop(i) for i in order}
        by_sampling: dict[str, list[int]] = {}
        for i in order:  # members with the same sampling settings share one call
            by_sampling.setdefault(requests[i][1].model_dump_json(), []).append(i)
        for members in by_sampling.values():
            try:
                outputs = self.handle.generate_batch([requests[i][0] for i in members], requests[members[0]][1], 1)
                for i, out in zip(members, outputs):
                    self._answers[i] = out[0]
            except BaseException as exc:  # every member of the call sees the failure (none is left waiting)
                for i in members:
                    self._answers[i] = exc
        self._cond.notify_all()


class MemberHandle:
    """One member's view of the batcher, with the policy handle's ``generate`` signature."""

    def __init__(self, batcher: GenerationBatcher, index: int) -> None:
        self.batcher = batcher
        self.index = index

    def generate(self, messages_or_prompt_ids: Sequence[Any], sampling: SamplingConfig) -> Any:
        return self.batcher.generate(self.index, messages_or_prompt_ids, sampling)

    def finish_reason(self, response_ids: Sequence[int], sampling: SamplingConfig) -> str:
        return self.batcher.handle.finish_reason(response_ids, sampling)
