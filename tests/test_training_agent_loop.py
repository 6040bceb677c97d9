"""GraphPlannerAgentLoop under verl's real agent-loop classes, on CPU: a bundled sample task prepared and registered
like a user would, real LocalSandboxes, the real toy tokenizer and verl's Continuous Token builder. The only fake
is the model server (``ScriptedServerManager``): there is no GPU / vLLM here."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import hydra
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopOutput,
    AgentLoopWorker,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from graph_planner.config.loader import dump_config_yaml
from graph_planner.config.schema import DataConfig, RunConfig
from graph_planner.data.prepare import prepare_datasets
from graph_planner.data.registry import AGENT_NAME, register_dataset
from graph_planner.env import assembly
from graph_planner.env.assembly import sandbox_slots
from graph_planner.integrations.episode_setup import load_run_config_file
from graph_planner.models.toy import ensure_toy_checkpoint
from graph_planner.sandbox.slots import SandboxSlots
from graph_planner.training.verl.agent_loop import (
    AGENT_LOOP_NAMES,
    AGENT_LOOP_TARGET,
    GraphPlannerAgentLoop,
    write_agent_loop_config,
)
from graph_planner.training.verl.config import AGENT_LOOP_NAME
from graph_planner.training.verl.lockstep import BATCH_KEY

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "sample"
TASK_ID = "graphplanner-samples__textkit-7"
TARGET = "fn:textkit/wrap.py::truncate"
COMMIT = json.dumps({"name": "memory_commit", "arguments": {"node_ids": [TARGET], "note": "slice ignores ellipsis"}})
REPAIR = json.dumps({"name": "repair", "arguments": {"plan": "subtract len(ellipsis)", "target_node_ids": [TARGET]}})
SUBMIT = json.dumps({"name": "submit", "arguments": {}})
NOTE = json.dumps({"name": "note", "arguments": {"text": "looking at truncate"}})
RESOLVING_SCRIPT = [COMMIT, REPAIR, SUBMIT]
pytestmark = pytest.mark.skipif(not (SAMPLE / "swebench" / "test.jsonl").is_file(), reason="no bundled samples")


class ScriptedServerManager:
    """Stands in for verl's LLM server manager (no GPU / vLLM here): each ``generate`` answers with the token ids
    of the episode's next scripted reply plus EOS, exactly as a server returns tokens, and records its inputs."""

    def __init__(self, tokenizer: Any, replies: list[str], delay_s: float = 0.0, fail_at: int | None = None,
                 block_at: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.replies = replies
        self.delay_s = delay_s
        self.fail_at = fail_at
        self.block_at = block_at
        self.blocked = asyncio.Event()
        self.calls: list[dict[str, Any]] = []
        self.outputs: dict[str, list[list[int]]] = {}

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> TokenOutput:
        turn = len(self.outputs.setdefault(request_id, [])) + 1
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "params": dict(sampling_params)})
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if turn == self.fail_at:
            raise RuntimeError("scripted server failure")
        if turn == self.block_at:
            self.blocked.set()
            await asyncio.Event().wait()  # a request that never answers
        reply = self.replies[min(turn, len(self.replies)) - 1]
        ids = self.tokenizer.encode(reply, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        ids = ids[: sampling_params["max_tokens"]]
        self.outputs[request_id].append(ids)
        logprobs = [-0.5] * len(ids) if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason="completed", num_preempted=0)


class BatchingScriptedServer(ScriptedServerManager):
    """The scripted server answering the hf rollout's lockstep rounds, each row as its own episode's request; the
    k-th episode (request id) it sees plays ``scripts[k]``."""

    def __init__(self, tokenizer: Any, scripts: list[list[str]]) -> None:
        super().__init__(tokenizer, [])
        self.scripts = scripts
        self.script_of: dict[str, list[str]] = {}
        self.rounds: list[int] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> TokenOutput:
        rows = sampling_params[BATCH_KEY]
        self.rounds.append(len(rows))
        shared = {k: v for k, v in sampling_params.items() if k != BATCH_KEY}
        answers = []
        for row in rows:
            if row["request_id"] not in self.script_of:
                self.script_of[row["request_id"]] = self.scripts[len(self.script_of)]
            self.replies = self.script_of[row["request_id"]]
            answers.append(await super().generate(row["request_id"], prompt_ids=row["prompt_ids"], sampling_params={
                **shared, "max_tokens": row["max_tokens"], "seed": row["seed"]}))
        return TokenOutput(token_ids=[], log_probs=None, stop_reason="completed", num_preempted=0,
                           extra_fields={BATCH_KEY: [{"token_ids": a.token_ids, "log_probs": a.log_probs}
                                                     for a in answers]})


class SandboxLedger:
    """Wraps the real make_sandbox: records which sandboxes were started and closed, and the most open at once."""

    def __init__(self, start_delay_s: float = 0.0) -> None:
        self.start_delay_s = start_delay_s
        self.boxes: list[Any] = []
        self.open: set[int] = set()
        self.closed: set[int] = set()
        self.max_open = 0
        self.start_entered = threading.Event()
        self._lock = threading.Lock()

    def factory(self, real):
        def make(*args: Any, **kwargs: Any) -> Any:
            box = real(*args, **kwargs)
            start, close = box.start, box.close

            def recording_start() -> None:
                self.start_entered.set()
                time.sleep(self.start_delay_s)
                start()
                with self._lock:
                    self.open.add(id(box))
                    self.max_open = max(self.max_open, len(self.open))

            def recording_close() -> None:
                close()
                with self._lock:
                    self.open.discard(id(box))
                    self.closed.add(id(box))

            box.start, box.close = recording_start, recording_close
            self.boxes.append(box)
            return box

        return make

    def all_closed(self) -> bool:
        return not self.open and {id(b) for b in self.boxes} <= self.closed and all(
            getattr(b, "_root", None) is None for b in self.boxes)


@pytest.fixture(scope="module")
def tokenizer(shared_model_cache):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ensure_toy_checkpoint(shared_model_cache))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """Sample tasks prepared and registered as verl parquet; returns (prepared dir, the row of TASK_ID)."""
    out = tmp_path_factory.mktemp("prepared")
    prepare_datasets(DataConfig(output_dir=str(out), r2e_dataset=str(SAMPLE / "r2e"),
                                swebench_dataset=str(SAMPLE / "swebench"), repos_dir=str(SAMPLE / "repos")))
    registered = register_dataset(out / "swebench" / "test.jsonl", "graph_planner", out / "registered", "train")
    rows = pq.read_table(registered.path).to_pylist()
    row = next(r for r in rows if json.loads(r["extra_info"]["task"])["task_id"] == TASK_ID)
    return out, row


@pytest.fixture
def ledger(monkeypatch) -> SandboxLedger:
    book = SandboxLedger()
    monkeypatch.setattr(assembly, "make_sandbox", book.factory(assembly.make_sandbox))
    return book


def write_run_config(tmp_path: Path, prepared_dir: Path, synthesizer: str, **sections: Any) -> Path:
    tree: dict[str, Any] = {
        "experiment": {"name": f"agent-loop-{tmp_path.name}"},
        "backends": {"cgm_backend": synthesizer},
        "data": {"output_dir": str(prepared_dir)},
        "paths": {"cache_dir": str(tmp_path / "cache")},
        "logging": {"output_dir": str(tmp_path / "runs")},
    }
    for section, values in sections.items():
        tree.setdefault(section, {}).update(values)
    path = tmp_path / "run_config.yaml"
    path.write_text(dump_config_yaml(RunConfig.model_validate(tree)), encoding="utf-8")
    return path


def make_loop(tmp_path: Path, run_config: Path, server: ScriptedServerManager, tokenizer: Any,
              response_length: int = 4096, rollout: str = "vllm") -> GraphPlannerAgentLoop:
    """Instantiate the loop the way verl's AgentLoopWorker does: entry from the agent-loop config file, then
    ``hydra.utils.instantiate`` with the worker's arguments (call inside the running event loop)."""
    entries = OmegaConf.load(write_agent_loop_config(tmp_path / "agent_loops.yaml", run_config))
    entry = next(e for e in entries if e.name == AGENT_NAME)
    trainer = OmegaConf.create({"actor_rollout_ref": {"rollout": {"name": rollout, "prompt_length": 8192,
                                                                  "response_length": response_length}},
                                "data": {}})
    return hydra.utils.instantiate(
        config=entry, trainer_config=DictConfigWrap(config=trainer), server_manager=server, tokenizer=tokenizer,
        processor=None, hf_model_type=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(trainer.data),
        tools=ToolListWrap([]))


def run_episode(tmp_path, run_config, server, tokenizer, row, **kw) -> tuple[AgentLoopOutput, GraphPlannerAgentLoop]:
    async def go():
        loop = make_loop(tmp_path, run_config, server, tokenizer, **kw)
        out = await loop.run({"temperature": 1.0, "top_p": 1.0, "logprobs": True}, raw_prompt=row["prompt"],
                             extra_info=row["extra_info"], data_source=row["data_source"], index=0)
        return out, loop

    return asyncio.run(go())


def verl_batch(outputs: list[AgentLoopOutput], tokenizer: Any, raw_prompt: Any, prompt_length: int = 8192,
               response_length: int = 4096):
    """verl's own AgentLoopWorker post-processing (padding, masks, rm_scores, extra fields) applied to our outputs;
    the worker is made without Ray or servers, with just the attributes these two methods read."""
    worker = AgentLoopWorker.__new__(AgentLoopWorker)
    worker.tokenizer, worker.processor, worker.mm_processor_kwargs = tokenizer, None, {}
    worker.rollout_config = SimpleNamespace(prompt_length=prompt_length, response_length=response_length)
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False

    async def pad_each():
        return [await worker._agent_loop_postprocess(o, False, raw_prompt=raw_prompt) for o in outputs]

    return worker._postprocess(asyncio.run(pad_each()))


def runs(mask: list[int]) -> list[tuple[int, int, int]]:
    """(value, start, end) of each run of equal mask values."""
    out, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            out.append((mask[start], start, i))
            start = i
    return out


def test_agent_loop_config_file_registers_the_loop_under_both_row_and_default_names(tmp_path, prepared):
    path = write_agent_loop_config(tmp_path / "loops.yaml", write_run_config(tmp_path, prepared[0], "none"))
    entries = OmegaConf.load(path)
    assert {e.name for e in entries} == {AGENT_LOOP_NAME, AGENT_NAME}
    assert all(e._target_ == AGENT_LOOP_TARGET and Path(e.run_config_path).is_absolute() for e in entries)
    # importing the module (which a worker does after loading this file) must not replace the file's entries
    assert all("run_config_path" in entry for name, entry in _agent_loop_registry.items() if name in AGENT_LOOP_NAMES)
    with pytest.raises(ValueError, match="needs run_config_path"):
        asyncio.run(_instantiate_without_config())


async def _instantiate_without_config() -> None:
    trainer = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 8, "response_length": 8}},
                                "data": {}})
    GraphPlannerAgentLoop(DictConfigWrap(trainer), None, None, None, RLHFDataset, DictConfigWrap(trainer.data))


def test_resolving_episode_is_token_exact_masks_observations_and_scores_one(tmp_path, prepared, tokenizer, ledger):
    prepared_dir, row = prepared
    server = ScriptedServerManager(tokenizer, RESOLVING_SCRIPT)
    out, loop = run_episode(tmp_path, write_run_config(tmp_path, prepared_dir, "gold"), server, tokenizer, row)

    assert out.reward_score == pytest.approx(1.0)
    summary = out.extra_fields["graph_planner"]
    assert summary["resolved"] and summary["termination_reason"] == "submitted" and summary["task_id"] == TASK_ID
    assert summary["patch_stats"]["kept"] == 1 and summary["diagnostic"] == "gold"
    assert out.extra_fields["reward_extra_info"]["gp_resolved"] == 1.0 and out.num_turns == 1 + 3 + 2
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)

    # token-in/token-out: every prompt sent to the server is a prefix of the final sequence, first = prompt_ids
    sequence = out.prompt_ids + out.response_ids
    assert server.calls[0]["prompt_ids"] == out.prompt_ids
    assert len({c["request_id"] for c in server.calls}) == 1 and len(server.calls) == 3
    for call in server.calls:
        assert sequence[: len(call["prompt_ids"])] == call["prompt_ids"]
    assert "Issue" in tokenizer.decode(out.prompt_ids) and "explore_find" in tokenizer.decode(out.prompt_ids)

    # model tokens (mask 1) are exactly what the server generated; observations (mask 0) come between them
    segments = runs(out.response_mask)
    assert [value for value, _, _ in segments] == [1, 0, 1, 0, 1]
    generated = [out.response_ids[a:b] for value, a, b in segments if value == 1]
    assert generated == next(iter(server.outputs.values()))
    assert [tokenizer.decode(g, skip_special_tokens=True) for g in generated] == RESOLVING_SCRIPT
    for k, (_, a, b) in enumerate(s for s in segments if s[0] == 0):
        assert f"[step {k + 1}/" in tokenizer.decode(out.response_ids[a:b], skip_special_tokens=True)
        assert set(out.response_logprobs[a:b]) == {0.0}
    assert all(lp == -0.5 for lp, m in zip(out.response_logprobs, out.response_mask, strict=True) if m == 1)

    assert len(ledger.boxes) == 1 and ledger.all_closed()
    assert loop.slots.held_count() == 0

    # verl's batch assembly takes the output as is: the reward lands on the last response token, no reward fn
    batch = verl_batch([out], tokenizer, row["prompt"])
    n = len(out.response_ids)
    rm_scores = batch.batch["rm_scores"][0]
    assert rm_scores[n - 1].item() == pytest.approx(1.0) and rm_scores.sum().item() == pytest.approx(1.0)
    assert batch.batch["response_mask"][0, :n].tolist() == out.response_mask
    assert batch.batch["response_mask"][0, n:].sum().item() == 0
    assert batch.non_tensor_batch["gp_resolved"].tolist() == [1.0]


def test_non_resolving_episode_scores_zero_or_less(tmp_path, prepared, tokenizer, ledger):
    prepared_dir, row = prepared
    server = ScriptedServerManager(tokenizer, ["I think the bug is in truncate.", *RESOLVING_SCRIPT])
    config = write_run_config(tmp_path, prepared_dir, "none", env={"format_penalty": 0.05})
    out, _ = run_episode(tmp_path, config, server, tokenizer, row)
    summary = out.extra_fields["graph_planner"]
    assert not summary["resolved"] and summary["termination_reason"] == "submitted"
    assert out.reward_score == pytest.approx(-0.05) and summary["parse_errors"] == 1
    assert summary["patch_stats"]["no_patch"] == {"synthesis-disabled": 1}
    assert ledger.all_closed()


def test_token_budget_cuts_the_episode_and_charges_the_limit_penalties(tmp_path, prepared, tokenizer, ledger):
    prepared_dir, row = prepared
    server = ScriptedServerManager(tokenizer, [NOTE])
    config = write_run_config(tmp_path, prepared_dir, "none", env={"timeout_penalty": 0.2, "failure_penalty": 0.3})
    out, _ = run_episode(tmp_path, config, server, tokenizer, row, response_length=80)
    assert len(out.response_ids) <= 80 and len(out.response_mask) == len(out.response_ids)
    assert out.extra_fields["graph_planner"]["termination_reason"] == "response_length"
    assert out.extra_fields["reward_extra_info"]["gp_truncated"] == 1.0
    assert out.reward_score == pytest.approx(-0.5)
    assert all(c["params"]["max_tokens"] <= 80 for c in server.calls)
    assert ledger.all_closed()


def test_sandbox_closed_and_slot_freed_when_the_server_fails_mid_episode(tmp_path, prepared, tokenizer, ledger):
    prepared_dir, row = prepared
    server = ScriptedServerManager(tokenizer, RESOLVING_SCRIPT, fail_at=2)
    with pytest.raises(RuntimeError, match="scripted server failure") as info:
        run_episode(tmp_path, write_run_config(tmp_path, prepared_dir, "gold"), server, tokenizer, row)
    assert any(TASK_ID in note for note in getattr(info.value, "__notes__", []))
    assert len(ledger.boxes) == 1 and ledger.all_closed()
    assert sandbox_slots(load_run_config_file(tmp_path / "run_config.yaml")).held_count() == 0


@pytest.mark.parametrize("when", ["generating", "starting the sandbox"])
def test_sandbox_closed_and_slot_freed_on_cancellation(tmp_path, prepared, tokenizer, ledger, when):
    prepared_dir, row = prepared
    server = ScriptedServerManager(tokenizer, RESOLVING_SCRIPT, block_at=2)
    ledger.start_delay_s = 0.5 if when == "starting the sandbox" else 0.0
    config = write_run_config(tmp_path, prepared_dir, "gold")

    async def go() -> GraphPlannerAgentLoop:
        loop = make_loop(tmp_path, config, server, tokenizer)
        task = asyncio.create_task(loop.run({"logprobs": False}, extra_info=row["extra_info"]))
        if when == "generating":
            await asyncio.wait_for(server.blocked.wait(), 60)
        else:
            while not ledger.start_entered.is_set():
                await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return loop

    loop = asyncio.run(go())
    assert len(ledger.boxes) == 1 and ledger.all_closed()
    assert ledger.closed  # the interrupted start finished in its thread, then the sandbox was closed
    assert loop.slots.held_count() == 0


class RendezvousServer(ScriptedServerManager):
    """Answers no turn until ``peers`` sandboxes have been open at once (or ``patience_s`` passed): the test then
    sees the cap reached whatever the machine's load (a slow sandbox start no longer lets the first episode end
    before the second opens), and a cap that ran episodes one at a time still shows as 1 open at most."""

    def __init__(self, tokenizer: Any, replies: list[str], ledger: SandboxLedger, peers: int,
                 patience_s: float = 10.0) -> None:
        super().__init__(tokenizer, replies)
        self.ledger, self.peers, self.patience_s = ledger, peers, patience_s

    async def generate(self, request_id: str, **kwargs: Any) -> TokenOutput:
        deadline = time.monotonic() + self.patience_s
        while self.ledger.max_open < self.peers and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return await super().generate(request_id, **kwargs)


def test_concurrent_loops_never_exceed_the_sandbox_cap(tmp_path, prepared, tokenizer, ledger):
    prepared_dir, row = prepared
    server = RendezvousServer(tokenizer, [NOTE], ledger, peers=2)
    config = write_run_config(tmp_path, prepared_dir, "none", parallel={"workflow_parallel": 2},
                              env={"max_steps": 2})

    async def go() -> list[AgentLoopOutput]:
        loops = [make_loop(tmp_path, config, server, tokenizer) for _ in range(5)]
        episodes = asyncio.gather(*(lp.run({}, extra_info=row["extra_info"]) for lp in loops))
        return await asyncio.wait_for(episodes, 120)  # a leaked slot would make the last episodes wait forever

    outputs = asyncio.run(go())
    assert len(outputs) == 5 and all(o.extra_fields["graph_planner"]["termination_reason"] == "max_steps"
                                     for o in outputs)
    assert len(ledger.boxes) == 5 and ledger.max_open == 2 and ledger.all_closed()


def test_hf_rollout_episodes_ask_in_lockstep_rounds_and_get_the_same_episodes(tmp_path, prepared, tokenizer,
                                                                              ledger):
    """With the hf rollout a worker's concurrent episodes are answered one batched request per round; each episode
    is token for token what it is alone. Three episodes of 3, 1 and 2 turns: rounds of 3, 2 and 1 rows."""
    prepared_dir, row = prepared
    config = write_run_config(tmp_path, prepared_dir, "gold", parallel={"workflow_parallel": 3})
    scripts = [RESOLVING_SCRIPT, [SUBMIT], [COMMIT, SUBMIT]]
    alone = [run_episode(tmp_path, config, ScriptedServerManager(tokenizer, script), tokenizer, row)[0]
             for script in scripts]

    async def go(server: BatchingScriptedServer) -> list[AgentLoopOutput]:
        loops = [make_loop(tmp_path, config, server, tokenizer, rollout="hf") for _ in scripts]
        assert len({id(loop.rounds) for loop in loops}) == 1  # the worker's (event loop's) loops share the rounds
        return await asyncio.wait_for(asyncio.gather(*(lp.run({"temperature": 1.0, "logprobs": True},
                                                              extra_info=row["extra_info"]) for lp in loops)), 120)

    server = BatchingScriptedServer(tokenizer, scripts)
    outputs = asyncio.run(go(server))
    assert server.rounds == [3, 2, 1]
    for out, single in zip(outputs, alone):
        assert out.prompt_ids == single.prompt_ids and out.response_ids == single.response_ids
        assert out.response_mask == single.response_mask and out.reward_score == single.reward_score
    assert ledger.all_closed()


def test_slots_are_shared_across_processes_and_freed_when_a_holder_dies(tmp_path):
    script = ("import time\nfrom graph_planner.sandbox.slots import SandboxSlots\n"
              f"slot = SandboxSlots({str(tmp_path)!r}, 2).try_acquire()\nprint(slot.index, flush=True)\n"
              "time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() in {"0", "1"}
        slots = SandboxSlots(tmp_path, 2)
        mine = slots.try_acquire()
        assert mine is not None and slots.try_acquire() is None and slots.held_count() == 2
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    again = slots.try_acquire()
    assert again is not None and again.index != mine.index
    mine.release()
    mine.release()  # idempotent
    again.release()
    assert slots.held_count() == 0


def test_visible_context_tail_keeps_the_last_window_tokens_of_the_added_block_with_their_metadata():
    from graph_planner.training.verl.agent_loop import visible_context_tail

    ids = [1, 2, 3, 10, 11, 12, 13, 14]  # prompt (1..3), then: a generated token 10, a 4-token observation block
    mask, logprobs = [1, 0, 0, 0, 0], [-0.5, 0.0, 0.0, 0.0, 0.0]
    assert visible_context_tail(ids, mask, logprobs, 4, None) == (ids, mask, logprobs)  # full attention: uncut
    assert visible_context_tail(ids, mask, logprobs, 4, 4) == (ids, mask, logprobs)  # fits the window
    cut_ids, cut_mask, cut_lp = visible_context_tail(ids, mask, logprobs, 4, 2)
    assert cut_ids == [1, 2, 3, 10, 13, 14] and cut_mask == [1, 0, 0] and cut_lp == [-0.5, 0.0, 0.0]
    assert visible_context_tail(ids, mask, None, 4, 2)[2] is None


def test_an_attention_window_shows_the_model_the_same_last_tokens_on_a_shorter_sequence(tmp_path, prepared, tokenizer,
                                                                                        ledger):
    """With ``training.attention_window`` W, each observation turn keeps its last W tokens: every prompt the model
    server gets ends in the same W tokens as without the cut (what its attention window reads next), the
    model's own tokens are unchanged, and the sequence is shorter."""
    prepared_dir, row = prepared
    window = 12
    outs, calls = {}, {}
    for name, training in (("full", {}), ("windowed", {"attention_window": window})):
        (tmp_path / name).mkdir()
        server = ScriptedServerManager(tokenizer, RESOLVING_SCRIPT)
        config = write_run_config(tmp_path / name, prepared_dir, "gold", training=training)
        outs[name], _ = run_episode(tmp_path / name, config, server, tokenizer, row)
        calls[name] = [c["prompt_ids"] for c in server.calls]
    full, windowed = outs["full"], outs["windowed"]
    assert windowed.reward_score == pytest.approx(1.0) and windowed.extra_fields["graph_planner"]["resolved"]
    assert len(calls["full"]) == len(calls["windowed"]) == 3
    for uncut, cut in zip(calls["full"], calls["windowed"], strict=True):
        assert cut[-window:] == uncut[-window:]
    assert calls["full"][1][-window - 1:] != calls["windowed"][1][-window - 1:]  # the cut did drop tokens
    observations = [b - a for value, a, b in runs(windowed.response_mask) if value == 0]
    assert observations and max(observations) == window
    generated = {name: [out.response_ids[a:b] for value, a, b in runs(out.response_mask) if value == 1]
                 for name, out in outs.items()}
    assert generated["full"] == generated["windowed"]
    assert len(windowed.response_ids) < len(full.response_ids)
    assert len(windowed.response_ids) == len(windowed.response_mask) == len(windowed.response_logprobs)
