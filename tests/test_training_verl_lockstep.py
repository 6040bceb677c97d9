"""Lockstep rounds of the hf rollout (graph_planner/training/verl/lockstep.py): a worker's concurrent episodes are
answered by one batched request per round, whose make-up depends on which episodes are still playing, never on
which finishes its tool call first. The server here is a recording stand-in; the real hf server's batched
``generate`` is tested in test_training_verl_cpu.py and the whole path in the verl job tests."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from verl.workers.rollout.replica import TokenOutput

from graph_planner.training.verl.lockstep import BATCH_KEY, LockstepRounds, round_seed, rounds_for


class RecordingServer:
    """Answers a batched request with each row's prompt length and seed as its tokens; records every call."""

    def __init__(self, fail_on_call: int | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail_on_call = fail_on_call

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        self.calls.append(sampling_params)
        await asyncio.sleep(0)
        if len(self.calls) == self.fail_on_call:
            raise RuntimeError("server down")
        rows = sampling_params[BATCH_KEY]
        answers = [{"token_ids": [len(r["prompt_ids"]), r["seed"]][: r["max_tokens"]], "log_probs": None}
                   for r in rows]
        return TokenOutput(token_ids=[], log_probs=None, stop_reason="completed", num_preempted=0,
                           extra_fields={"global_steps": 7, BATCH_KEY: answers})


async def play(rounds: LockstepRounds, turns: int, tool_delays: list[float], seed: int,
               log: list[tuple[int, list[int]]]) -> None:
    member = rounds.join()
    try:
        for turn in range(turns):
            out = await rounds.generate(member, f"r{member}", [1] * (member + turn + 1),
                                        {"temperature": 1.0, "max_tokens": 8, "seed": seed + turn})
            assert out.extra_fields["global_steps"] == 7 and BATCH_KEY not in out.extra_fields
            log.append((member, out.token_ids))
            await asyncio.sleep(tool_delays[turn])  # the env's tool call: how long depends on the sandbox
    finally:
        rounds.leave(member)


def run_members(turns: list[int], delays: list[list[float]], server: RecordingServer) -> list[tuple[int, list[int]]]:
    async def go() -> list[tuple[int, list[int]]]:
        rounds = LockstepRounds(server.generate)
        log: list[tuple[int, list[int]]] = []
        await asyncio.gather(*(play(rounds, t, d, 100 * i, log) for i, (t, d) in enumerate(zip(turns, delays))))
        return log

    return asyncio.run(go())


def test_rounds_batch_every_playing_member_whatever_order_their_tools_finish_in():
    turns = [3, 1, 4, 2]
    shuffled = random.Random(0)
    calls = []
    for _ in range(2):  # two runs whose tool calls finish in different orders
        server = RecordingServer()
        delays = [[shuffled.random() / 100 for _ in range(t)] for t in turns]
        log = run_members(turns, delays, server)
        calls.append([[(len(r["prompt_ids"]), r["seed"]) for r in c[BATCH_KEY]] for c in server.calls])
        # every member got its own row back
        assert sorted(log) == sorted((m, [m + t + 1, 100 * m + t]) for m, n in enumerate(turns) for t in range(n))
    assert calls[0] == calls[1]
    # one call per round, not one per generation: rounds shrink as members finish (4, 3, 2, 1 rows)
    assert [len(c) for c in calls[0]] == [4, 3, 2, 1]


def test_a_round_carries_a_seed_derived_from_its_rows_and_the_largest_budget():
    server = RecordingServer()
    run_members([1, 1], [[0.0], [0.0]], server)
    (call,) = server.calls
    assert call["seed"] == round_seed([0, 100]) != round_seed([100, 0])
    assert call["max_tokens"] == 8 and call["temperature"] == 1.0
    assert round_seed([1, None]) is None


def test_a_failed_round_reaches_every_member_and_nobody_waits_forever():
    server = RecordingServer(fail_on_call=2)
    with pytest.raises(RuntimeError, match="server down"):
        run_members([3, 3, 3], [[0.0] * 3] * 3, server)
    assert len(server.calls) == 2


def test_a_cancelled_member_leaves_and_the_others_finish():
    async def go() -> tuple[list, int]:
        server = RecordingServer()
        rounds = LockstepRounds(server.generate)
        log: list = []
        stuck = asyncio.Event()

        async def stalls_in_its_tool() -> None:
            member = rounds.join()
            try:
                await rounds.generate(member, "s", [1], {"temperature": 1.0, "max_tokens": 8, "seed": 1})
                await stuck.wait()  # a tool call that never returns, until cancelled
            finally:
                rounds.leave(member)

        staller = asyncio.ensure_future(stalls_in_its_tool())
        others = asyncio.ensure_future(asyncio.gather(*(play(rounds, 3, [0.0] * 3, 10 * i, log) for i in range(2))))
        await asyncio.sleep(0.05)
        assert not others.done()  # round 2 waits for the staller
        staller.cancel()
        await asyncio.wait_for(others, 5)
        return log, len(server.calls)

    log, calls = asyncio.run(go())
    assert len(log) == 6 and calls == 3


def test_members_with_different_sampling_settings_go_in_separate_calls():
    async def go(server: RecordingServer) -> None:
        rounds = LockstepRounds(server.generate)

        async def one(temperature: float) -> None:
            member = rounds.join()
            try:
                await rounds.generate(member, "x", [1, 2], {"temperature": temperature, "max_tokens": 4, "seed": 3})
            finally:
                rounds.leave(member)

        await asyncio.gather(one(1.0), one(0.0), one(1.0))

    server = RecordingServer()
    asyncio.run(go(server))
    assert sorted(len(c[BATCH_KEY]) for c in server.calls) == [1, 2]


def test_one_rounds_object_per_event_loop():
    """verl makes a new agent-loop object per episode: they meet in the worker's one rounds object."""
    async def joins() -> list[int]:
        return [rounds_for(RecordingServer().generate).join() for _ in range(2)]

    assert asyncio.run(joins()) == [0, 1]
    assert asyncio.run(joins()) == [0, 1]  # a new event loop starts new rounds


class ForeignServer(RecordingServer):
    """A server that is not the project's hf rollout: it answers a batched request as one request (no ``batch``
    rows), or, ``drop`` set, with one row fewer than it was sent."""

    def __init__(self, drop: bool) -> None:
        super().__init__()
        self.drop = drop

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        out = await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)
        rows = out.extra_fields[BATCH_KEY]
        out.extra_fields = {"global_steps": 7, **({BATCH_KEY: rows[:-1]} if self.drop else {})}
        return out


@pytest.mark.parametrize(("drop", "said"), [(False, "with no batch"), (True, "with 1 rows")])
def test_a_server_that_does_not_answer_every_row_is_refused_by_name_and_nobody_waits(drop, said):
    """A round's rows must come back one answer each: a server that answers fewer (or none) would leave an episode
    with another's tokens or none. Every member gets the error naming the hf rollout; none hangs."""
    with pytest.raises(RuntimeError, match=f"batched request of 2 rows {said}: .*training.rollout_engine: hf"):
        run_members([2, 2], [[0, 0], [0, 0]], ForeignServer(drop))
