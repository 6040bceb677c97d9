"""The verl agent loop of Graph Planner: one PlannerEnv (one sandbox) per trajectory, token-in/token-out turns
through verl's server manager, and the env's episode return as ``reward_score`` (so no reward function runs).

Wiring: the agent-loop config file (``actor_rollout_ref.rollout.agent.agent_loop_config_path``, written by
:func:`write_agent_loop_config`) lists this class under every name a row may ask for, each entry carrying
``run_config_path``: the job's run config YAML, the single source of env, sandbox, synthesiser and cap settings
inside verl's Ray workers. The TaskRecord comes from the row's ``extra_info.task``. The class is deliberately not
decorated with verl's ``@register``: the decorator runs when a worker first imports this module, i.e. *after* the
worker loaded the config file, and would replace those entries with ones lacking ``run_config_path``.

Tokens: the prompt (system prompt + the env's first observation, which holds the issue and the node ids; the
row's ``raw_prompt`` is not used) is rendered once by verl's Continuous Token builder. After that tokens are only
appended: the model's tokens as generated (mask 1), then each observation as a user turn (mask 0), so nothing the
model produced is re-tokenized. Unlike the local ModelPolicy, history is never trimmed (``env.history_turns``
does not apply): a trajectory is one token sequence, bounded by verl's ``response_length``; each turn generates
at most ``planner_sampling.max_new_tokens``. With ``training.attention_window`` (a model that attends to its last
N tokens) an observation turn keeps only its last N tokens, as the local engine's per-turn prompt does
(:func:`visible_context_tail`). A first prompt over ``rollout.prompt_length`` (``data.max_prompt_length``) keeps its
last tokens by the project's cut (:func:`graph_planner.models.chat.cut_prompt`), warned once per worker process.

Sandboxes: at most ``parallel.workflow_parallel`` open at once per node, across all worker processes
(:mod:`graph_planner.sandbox.slots`, the cap every runner's sandbox takes in ``build_env``): the loop waits for
its slot without blocking a thread and hands it to the sandbox. Env calls run in threads. The sandbox is closed
and the slot freed on every path (done, cut by the token budget, error, cancellation), after any env call still
running in its thread. Errors (model server, sandbox start) propagate after cleanup, so verl marks the group
failed rather than training on a made-up reward.

Telemetry: every finished episode is appended to ``<run dir>/verl/episodes.jsonl`` with the step it was generated
for; the job's entry process turns them into the seed metric names (:mod:`graph_planner.training.verl.telemetry`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from uuid import uuid4

import yaml
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput
from verl.utils.rollout_trace import rollout_trace_op

from graph_planner.data.record import TaskRecord
from graph_planner.data.registry import AGENT_NAME as ROW_AGENT_NAME
from graph_planner.env.assembly import build_env, sandbox_slots
from graph_planner.env.planner_env import PlannerEnv, StepResult
from graph_planner.episode.summary import EpisodeSummary
from graph_planner.episode.wire import system_prompt
from graph_planner.integrations.episode_setup import (
    dataset_dir_for,
    load_run_config_file,
    row_dict,
    task_from_row,
)
from graph_planner.models.chat import cut_prompt
from graph_planner.sandbox.slots import SandboxSlot, SandboxSlots
from graph_planner.training.verl.config import AGENT_LOOP_NAME
from graph_planner.training.verl.hf_rollout import ROLLOUT_NAME
from graph_planner.training.verl.lockstep import LockstepRounds, rounds_for
from graph_planner.training.verl.telemetry import EPISODES_FILE, record_episode, telemetry_dir

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Every name the loop answers to: verl_config's ``default_agent_loop`` and the ``agent_name`` registered rows
#: carry (in verl a row's agent_name wins over the default).
AGENT_LOOP_NAMES = tuple(dict.fromkeys((AGENT_LOOP_NAME, ROW_AGENT_NAME)))
AGENT_LOOP_TARGET = f"{__name__}.GraphPlannerAgentLoop"


def agent_loop_config_entries(run_config_path: str | Path) -> list[dict[str, Any]]:
    """The agent-loop config file's entries: one per name, all with the run config's absolute path."""
    path = str(Path(run_config_path).expanduser().resolve())
    return [{"name": name, "_target_": AGENT_LOOP_TARGET, "run_config_path": path} for name in AGENT_LOOP_NAMES]


def write_agent_loop_config(path: str | Path, run_config_path: str | Path) -> Path:
    """Write the file ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` points at; returns its path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(agent_loop_config_entries(run_config_path), sort_keys=False), encoding="utf-8")
    return out


class EpisodeSandbox:
    """The env side of one trajectory. The env is sync (docker calls block), so its calls run on the slot pool's
    threads; ``close`` waits for a call still running (cancelling an await does not stop its thread), closes the
    sandbox, frees the slot, and completes even when the task awaiting it is cancelled again."""

    def __init__(self, slots: SandboxSlots, slot: SandboxSlot) -> None:
        self.slots = slots
        self.slot = slot
        self.env: PlannerEnv | None = None
        self._inflight: concurrent.futures.Future[Any] | None = None

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        future = self.slots.executor.submit(fn, *args)
        self._inflight = future
        return await asyncio.wrap_future(future)

    async def open(self, build: Callable[[], PlannerEnv]) -> tuple[str, dict[str, Any]]:
        """Build the env (sandbox + synthesiser) and reset it, which starts the sandbox; returns the first obs."""
        def build_and_reset() -> tuple[str, dict[str, Any]]:
            self.env = build()  # kept before start, so close() finds a sandbox whose start was interrupted
            return self.env.reset()

        return await self.call(build_and_reset)

    def _close_now(self) -> None:
        try:
            if self._inflight is not None:
                concurrent.futures.wait([self._inflight])
            if self.env is not None:
                try:
                    self.env.sandbox.close()
                except Exception as exc:  # noqa: BLE001 - cleanup must go on; the reaper handles docker leftovers
                    log.warning("task %s: closing the sandbox failed: %s", self.env.task.task_id, exc)
        finally:
            self.slot.release()

    async def close(self) -> None:
        await asyncio.shield(asyncio.wrap_future(self.slots.executor.submit(self._close_now)))


def _clipped(reward: float, clip: float | None) -> float:
    """ROLL ``training.reward_clip``: the episode return verl sees, clipped to [-clip, clip]."""
    return reward if clip is None else max(-clip, min(clip, reward))


#: Episodes of each task this worker process has started. The k-th of a task samples with seeds derived from (run
#: seed, task, k), so a run draws the same episodes whatever order the concurrent requests reach the model server in
#: (verl starts a batch's episodes in batch order, and this count is taken before the first await).
_EPISODES_STARTED: Counter[str] = Counter()


#: First prompts this worker process has cut: the first cut is a warning, later ones debug (not one per episode).
_FIRST_PROMPT_CUTS = 0


def cap_first_prompt(prompt_ids: list[int], prompt_length: int) -> list[int]:
    """verl's cap of an episode's first prompt (``rollout.prompt_length``) by the one cut training and eval use:
    its last ``prompt_length`` tokens, logged as a warning the first time in this process."""
    global _FIRST_PROMPT_CUTS
    ids, cut = cut_prompt(list(prompt_ids), prompt_length, _FIRST_PROMPT_CUTS,
                          "training.max_prompt_length, verl's data.max_prompt_length")
    _FIRST_PROMPT_CUTS += cut
    return ids


def episode_seed(seed: int, task_id: str, occurrence: int) -> int:
    """The sampling seed of one episode's first turn (turn t uses this + t): 31 bits of sha256 of its identity."""
    digest = hashlib.sha256(f"{seed}:{task_id}:{occurrence}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def visible_context_tail(token_ids: list[int], mask: list[int], logprobs: list[float] | None, added: int,
                         window: int | None) -> tuple[list[int], list[int], list[float] | None]:
    """Of the ``added`` context tokens just appended (an observation turn), keep the last ``window``: what a model
    attending to its last ``window`` tokens (``training.attention_window``) reads of them when it next writes.

    With ``window`` = ``max_prompt_length`` this is what the local engine's per-turn prompt (the last
    ``max_prompt_length`` tokens of the turn's context) gives the model. Not bit-for-bit the uncut sequence: each
    layer attends ``window`` tokens back, so through the kept tokens' own states a 2-layer model's last layer
    reached up to 2 x ``window`` tokens back. It keeps an observation of a few hundred tokens from spending the
    trajectory's ``max_response_length`` budget: uncut, 12.5 % of a step's episodes of local_verl_learning.yaml
    ended on that budget, which the local engine never does (measured 2026-11-28)."""
    if not window or added <= window:
        return token_ids, mask, logprobs

    def keep(seq: list[Any]) -> list[Any]:  # the block is the tail of the sequence and of its response metadata
        return seq[:len(seq) - added] + seq[-window:]

    return keep(token_ids), keep(mask), None if logprobs is None else keep(logprobs)


def response_clipped(token_ids: list[int], budget: int, stop_ids: set[int]) -> bool:
    """A generation that used its whole ``max_tokens`` without a stop token was cut at the length limit."""
    return len(token_ids) >= budget and not (token_ids and token_ids[-1] in stop_ids)


class GraphPlannerAgentLoop(AgentLoopBase):
    """Runs one Graph Planner episode per ``run`` (verl makes a new instance per trajectory)."""

    def __init__(self, *args: Any, run_config_path: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not run_config_path:
            raise ValueError(
                "GraphPlannerAgentLoop needs run_config_path (the job's run config YAML) in its entry of the "
                "agent-loop config file; write that file with graph_planner.training.verl.agent_loop."
                "write_agent_loop_config")
        self.run_config = load_run_config_file(run_config_path)
        self.response_length = int(self.rollout_config.response_length)
        self.slots = sandbox_slots(self.run_config)
        self.run_id = f"verl-{self.run_config.run_name}"
        # the hf rollout answers one request per generate call: the worker's episodes ask it in lockstep rounds
        self.rounds: LockstepRounds | None = (
            rounds_for(self.server_manager.generate) if getattr(self.rollout_config, "name", None) == ROLLOUT_NAME
            else None)
        self.member: int | None = None

    def _cap_text_prompt_length(self, prompt_ids: list[int]) -> list[int]:
        """verl's first-prompt cap (called by ``ct_build_initial_tokens``) through :func:`cap_first_prompt`."""
        return cap_first_prompt(prompt_ids, int(self.rollout_config.prompt_length))

    @rollout_trace_op
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        row = row_dict(kwargs.get("extra_info") or {})
        task = task_from_row(row)
        dataset_dir = dataset_dir_for(task, self.run_config, row)
        occurrence = _EPISODES_STARTED[task.task_id]
        _EPISODES_STARTED[task.task_id] += 1
        sampling_params = {**sampling_params, "seed": episode_seed(self.run_config.experiment.seed, task.task_id,
                                                                    occurrence)}
        slot = await self.slots.acquire()
        box = EpisodeSandbox(self.slots, slot)  # no await between acquire and try: the slot cannot leak
        # a free slot is taken without suspending, so a step's episodes join the rounds in verl's batch order
        self.member = None if self.rounds is None else self.rounds.join()
        try:
            return await self._episode(box, task, dataset_dir, dict(sampling_params), kwargs.get("uid"))
        except Exception as exc:
            exc.add_note(f"graph planner agent loop: task {task.task_id} (run {self.run_id})")
            raise
        finally:
            if self.rounds is not None and self.member is not None:
                self.rounds.leave(self.member)  # before the sandbox closes: no round waits on the close
            await box.close()

    async def _generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        """One turn's generation: through this worker's lockstep round (hf rollout) or straight to the server."""
        if self.rounds is not None and self.member is not None:
            return await self.rounds.generate(self.member, request_id, prompt_ids, sampling_params)
        return await self.server_manager.generate(request_id=request_id, prompt_ids=prompt_ids,
                                                  sampling_params=sampling_params)

    async def _episode(self, box: EpisodeSandbox, task: TaskRecord, dataset_dir: Path,
                       sampling_params: dict[str, Any], group: Any = None) -> AgentLoopOutput:
        config = self.run_config
        started = time.perf_counter()
        first_obs, _ = await box.open(lambda: build_env(task, config, dataset_dir, self.run_id, slot=box.slot))
        env_s = time.perf_counter() - started
        env = box.env
        assert env is not None
        messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt()},
                                          {"role": "user", "content": first_obs}]
        tokens = await self.ct_build_initial_tokens(messages)
        mask: list[int] = []
        logprobs: list[float] = []
        rewards: list[float] = []
        last: StepResult | None = None
        request_id = uuid4().hex  # one id per episode: sticky routing, prefix-cache hits
        gen_s, preempted, generations, observations = 0.0, -1, 0, 0
        weights_step: int | None = None  # the rollout's weight version (the server's global_steps)
        stop_ids = {i for i in (self.tokenizer.eos_token_id, *(sampling_params.get("stop_token_ids") or []))
                    if i is not None}
        while True:
            budget = min(self.response_length - len(mask), config.planner_sampling.max_new_tokens)
            if budget <= 0:
                break
            clock = time.perf_counter()
            out = await self._generate(request_id, tokens, {**sampling_params, "max_tokens": budget,
                                                            "seed": sampling_params["seed"] + generations})
            gen_s += time.perf_counter() - clock
            if weights_step is None and out.extra_fields.get("global_steps") is not None:
                weights_step = int(out.extra_fields["global_steps"])
            if out.num_preempted is not None:
                preempted = max(preempted, 0) + out.num_preempted
            merged, mask, new_logprobs = await self.ct_merge_assistant_token(
                tokens, out.token_ids, mask, logprobs if (logprobs or out.log_probs) else None,
                assistant_logprobs=out.log_probs or None)
            tokens, generations = merged.token_ids, generations + 1
            if new_logprobs is not None:
                logprobs = new_logprobs
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            clock = time.perf_counter()
            clipped = response_clipped(list(out.token_ids), budget, stop_ids)
            last = await box.call(functools.partial(env.step, text, response_clipped=clipped))
            env_s += time.perf_counter() - clock
            rewards.append(last.reward)
            if last.done or len(mask) >= self.response_length:
                break
            previous = [*messages, {"role": "assistant", "content": text}]
            updated = [*previous, {"role": "user", "content": last.observation}]
            merged, new_mask, new_logprobs = await self.ct_merge_context_msg(
                previous, updated, tokens, mask, logprobs or None)
            merged_ids, new_mask, new_logprobs = visible_context_tail(
                merged.token_ids, new_mask, new_logprobs,
                merged.appended_token_count + len(merged.inserted_token_ids), config.training.attention_window)
            if len(new_mask) >= self.response_length:
                break  # the observation does not fit: the episode ends here, cut by the token budget
            tokens, mask, messages, observations = merged_ids, new_mask, updated, observations + 1
            if logprobs:
                logprobs = new_logprobs or []
        # the env's summary; when verl's token budget cut the episode first, the env ends it (charged like its
        # own limits) and builds it then
        summary = env.summary if last is not None and last.done else await box.call(env.cut_short,
                                                                                      "response_length")
        assert summary is not None
        output = self._output(summary, tokens, mask, logprobs, rewards,
                              {"generate_sequences": gen_s, "tool_calls": env_s, "num_preempted": preempted},
                              num_turns=1 + generations + observations)
        record_episode(telemetry_dir(config) / EPISODES_FILE, weights_step, summary,
                       time.perf_counter() - started, None if group is None else str(group))
        return output

    def _output(self, summary: EpisodeSummary, tokens: list[int], mask: list[int], logprobs: list[float],
                rewards: list[float], metrics: dict[str, Any], num_turns: int) -> AgentLoopOutput:
        split = len(tokens) - len(mask)
        limit = self.response_length
        return AgentLoopOutput(
            prompt_ids=tokens[:split],
            response_ids=tokens[split:][:limit],
            response_mask=mask[:limit],
            response_logprobs=logprobs[:limit] if logprobs else None,
            reward_score=_clipped(summary.episode_return, self.run_config.training.reward_clip),
            num_turns=num_turns,
            metrics=metrics,
            extra_fields={
                "turn_scores": list(rewards),
                "tool_rewards": [],
                "graph_planner": summary.metrics_record(),
                # same keys for every sample: verl logs these next to the score
                "reward_extra_info": {
                    "gp_resolved": float(summary.resolved),
                    "gp_steps": summary.steps,
                    "gp_parse_errors": summary.parse_errors,
                    "gp_patches_kept": int(summary.patch_stats.get("kept", 0)),
                    "gp_truncated": float(summary.termination_reason == "response_length"),
                    "gp_tampered": float(summary.tampered),
                },
            },
        )

