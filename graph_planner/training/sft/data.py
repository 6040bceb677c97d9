"""Chat SFT data from planner trajectories, in exactly the prompt/response form the planner sees at RL time.

Sources (``training.sft.source``):

* ``rule`` — the rule policy plays ``training.sft.episodes_per_task`` episodes of every training task in real
  sandboxes with the run's synthesiser; ``training.sft.exploration`` > 0 makes some of its node choices random
  (another node of the last listing), so the demonstrations differ from episode to episode.
* ``trajectories`` — the ``*.jsonl`` trajectories of any eval run (``<eval dir>/trajectories``).

``training.sft.only_resolved`` keeps only resolved episodes (rejection-sampling fine-tuning, as SWE-Gym does).
Each kept turn whose output parsed becomes one example: the prompt is the message list
:meth:`ModelPolicy.build_messages` builds for that turn (system prompt, first observation, the last
``env.history_turns`` turns), the response is the turn's text (the canonical action JSON for rule turns).
:func:`tokenize_example` then encodes them the way rollouts do: the chat template with the generation prompt,
cut to its last ``training.max_prompt_length`` tokens, and the response followed by the EOS (end-of-turn) token.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph_planner.agents.model_policy import ModelPolicy
from graph_planner.agents.rule_policy import RulePolicy, SynthesizerOnlyPolicy, failing_tests, issue_queries
from graph_planner.config.schema import RunConfig
from graph_planner.episode.actions import ActionBase, ExploreExpand, ExploreFind, MemoryCommit, Read, Repair
from graph_planner.episode.turns import Turn
from graph_planner.termination import leave_pool

log = logging.getLogger(__name__)


@dataclass
class SFTExample:
    """One planner turn to imitate: the chat prompt and the assistant's reply (plus where it came from)."""

    messages: list[dict[str, Any]]
    response: str
    task_id: str
    source: str


class ExploringRulePolicy(RulePolicy):
    """The SFT demonstrator: a rule flow, written compactly, with seeded exploration.

    ``flow``: ``explore`` is the rule policy's find -> expand -> read -> commit -> repair -> submit; ``search`` is
    the shorter find -> commit a hit -> repair -> submit (the synthesiser-only localisation), two decisions per
    episode (the query and the node), which a toy model can learn. Compact (``compact=True``): a commit holds one
    node and a repair carries a one-line plan and no target ids (the synthesiser works from memory M), so every
    response is a few dozen tokens. Exploration: with probability ``epsilon`` the search query is another name
    from the issue, and a node it would expand, read or commit is swapped for another code node of the last
    listing, so demonstrations differ from episode to episode (and include detours GRPO can learn to avoid)."""

    name = "rule-exploring"
    SHORT_PLAN = "Fix the issue in the code in memory."

    def __init__(self, epsilon: float, seed: int, max_repairs: int = 1, compact: bool = True,
                 flow: str = "explore") -> None:
        super().__init__(max_repairs)
        self.epsilon = epsilon
        self.compact = compact
        self.flow = SynthesizerOnlyPolicy(max_repairs) if flow == "search" else RulePolicy(max_repairs)
        self.rng = random.Random(seed)

    def next_action(self, obs: dict[str, Any], history: list[Turn]) -> ActionBase:
        action = self._explore(self._test_in_view(self.flow.next_action(obs, history), obs, history), obs)
        if not self.compact:
            return action
        if isinstance(action, MemoryCommit):
            return MemoryCommit(node_ids=action.node_ids[:1])
        if isinstance(action, Repair):
            return Repair(plan=self.SHORT_PLAN)
        return action

    @staticmethod
    def _test_in_view(action: ActionBase, obs: dict[str, Any], history: list[Turn]) -> ActionBase:
        """A search for a failing test names the one the issue quotes LAST (of those not searched yet): prompts
        are cut to their last ``training.max_prompt_length`` tokens, and a symptom report's first test ids are
        often cut (at 128 tokens the first quoted test was in view on 3 of the 22 val tasks, the last on 9; at
        192 the last on all 22): a demonstration that searches a name the model cannot see teaches it to recall
        train-set names instead of reading the report. Any failing test leads to the code under test."""
        if not isinstance(action, ExploreFind):
            return action
        issue = obs.get("issue", {})
        tests = [name.rsplit(".", 1)[-1]
                 for _, name in failing_tests(f"{issue.get('title', '')}\n{issue.get('text', '')}")]
        if action.query not in tests:
            return action
        tried = {t.action["arguments"].get("query") for t in history if t.action and t.action["name"] == "explore_find"}
        untried = [t for t in tests if t not in tried]
        return action.model_copy(update={"query": untried[-1]}) if untried else action

    def _explore(self, action: ActionBase, obs: dict[str, Any]) -> ActionBase:
        if self.epsilon <= 0 or self.rng.random() >= self.epsilon:
            return action
        if isinstance(action, ExploreFind):
            issue = obs.get("issue", {})
            queries = issue_queries(issue.get("text", ""), issue.get("title", ""))
            return action.model_copy(update={"query": self.rng.choice(queries)}) if queries else action
        listed = [n["id"] for n in (obs.get("result") or {}).get("nodes", []) if n.get("kind") in ("FUNCTION",
                                                                                                   "CLASS")]
        if not listed:
            return action
        other = self.rng.choice(listed)
        if isinstance(action, (ExploreExpand, Read)):
            return action.model_copy(update={"node_id": other})
        if isinstance(action, MemoryCommit):
            return action.model_copy(update={"node_ids": [other]})
        return action


def turns_of(rows: list[dict[str, Any]]) -> list[Turn]:
    """Turn records of a trajectory JSONL's step rows (what ModelPolicy's history holds)."""
    return [Turn(prompt_messages=[], response_text=str(r.get("response_text") or ""), action=r.get("action"),
                 observation=str(r.get("observation") or ""), reward=float(r.get("reward") or 0.0),
                 parse_error=(r.get("parse_error") or {}).get("code") if r.get("parse_error") else None,
                 used_fallback=bool(r.get("used_fallback")))
            for r in rows if r.get("kind") == "step"]


def is_resolved(rows: list[dict[str, Any]]) -> bool:
    last = rows[-1] if rows else {}
    return bool(((last.get("info") or {}).get("episode") or {}).get("resolved"))


def examples_from_rows(rows: list[dict[str, Any]], history_turns: int, source: str) -> list[SFTExample]:
    """Every turn of one trajectory (JSONL rows) whose output parsed, with the prompt the model saw for it."""
    if not rows or rows[0].get("kind") != "reset":
        raise ValueError("a trajectory starts with its 'reset' row (graph_planner/env/replay.py format)")
    first = str(rows[0].get("observation") or "")
    turns = turns_of(rows)
    prompter = ModelPolicy(chat=None, history_turns=history_turns)  # type: ignore[arg-type] - builds prompts only
    prompter.reset()
    out = []
    for i, turn in enumerate(turns):
        messages = prompter.build_messages(first if i == 0 else turns[i - 1].observation, turns[:i])
        if turn.action is None or turn.parse_error or turn.used_fallback or not turn.response_text.strip():
            continue  # never imitate an invalid output or an action the model did not write
        out.append(SFTExample([dict(m) for m in messages], turn.response_text, str(rows[0].get("task_id")), source))
    return out


def rule_trajectories(config: RunConfig) -> Iterable[list[dict[str, Any]]]:
    """Rule-policy episodes on the training tasks (``episodes_per_task`` each), as trajectory JSONL rows, played
    ``parallel.parallel_agents`` at a time (each episode seeds its own exploration, so the rows do not depend on it)."""
    from graph_planner.env.assembly import graph_cache, open_env
    from graph_planner.env.episode import run_episode
    from graph_planner.env.replay import trajectory_lines
    from graph_planner.training.local.rollout import load_training_tasks, rollout_concurrency, training_data_path

    sft = config.training.sft
    tasks, dataset_dir = load_training_tasks(training_data_path(config.paths))
    cache = graph_cache(config)
    run_id = f"sft-{config.run_name}"

    def play(job: tuple[int, int]) -> list[dict[str, Any]]:
        t, k = job
        # the first episode of each task is the plain rule policy; the others explore
        epsilon = sft.exploration if k > 0 else 0.0
        policy = ExploringRulePolicy(epsilon, seed=config.experiment.seed * 1000 + t * 100 + k, flow=sft.flow)
        with open_env(tasks[t], config, dataset_dir, run_id, cache=cache) as env:
            return trajectory_lines(run_episode(tasks[t], env, policy))

    jobs = [(t, k) for t in range(len(tasks)) for k in range(sft.episodes_per_task)]
    # parallel.parallel_agents episodes at once, each in its own sandbox; results in job order
    with leave_pool(ThreadPoolExecutor(max_workers=rollout_concurrency(config),
                                       thread_name_prefix="sft-episode")) as pool:
        yield from pool.map(play, jobs)


def file_trajectories(directory: str | Path) -> Iterable[list[dict[str, Any]]]:
    """The trajectory JSONL files of an eval run's ``trajectories/`` dir (sorted by name)."""
    from graph_planner.env.replay import read_trajectory_jsonl

    root = Path(directory)
    files = sorted(root.glob("*.jsonl")) if root.is_dir() else []
    if not files:
        raise FileNotFoundError(f"training.sft.trajectories_dir: no trajectory *.jsonl files in {root} (an eval "
                                "run writes them to <eval dir>/trajectories)")
    for path in files:
        yield read_trajectory_jsonl(path)


def collect_examples(config: RunConfig) -> tuple[list[SFTExample], dict[str, int]]:
    """The SFT examples of ``training.sft`` and counts (episodes seen / kept, examples)."""
    sft = config.training.sft
    if sft.source == "trajectories":
        if not sft.trajectories_dir:
            raise ValueError("training.sft.source=trajectories needs training.sft.trajectories_dir (an eval run's "
                             "trajectories/ dir)")
        episodes = file_trajectories(sft.trajectories_dir)
    else:
        episodes = rule_trajectories(config)
    examples: list[SFTExample] = []
    seen = kept = 0
    for rows in episodes:
        seen += 1
        if sft.only_resolved and not is_resolved(rows):
            continue
        kept += 1
        examples.extend(examples_from_rows(rows, config.env.history_turns, sft.source))
    stats = {"episodes": seen, "episodes_kept": kept, "examples": len(examples)}
    log.info("SFT data from %s: %d episode(s), %d kept, %d example(s)", sft.source, seen, kept, len(examples))
    if not examples:
        raise ValueError(f"training.sft: no examples from {sft.source} ({seen} episode(s), {kept} kept"
                         + (", only_resolved=true" if sft.only_resolved else "") + ")")
    return examples, stats


def tokenize_example(example: SFTExample, tokenizer: Any, max_prompt_length: int) -> dict[str, list[int]]:
    """``input_ids`` + ``completion_mask`` as rollouts tokenize: chat template with the generation prompt, the
    prompt's last ``max_prompt_length`` tokens (PolicyHandle.encode does the same), then the response + EOS."""
    text = tokenizer.apply_chat_template(example.messages, add_generation_prompt=True, tokenize=False)
    prompt = list(tokenizer(text, add_special_tokens=False)["input_ids"])[-max_prompt_length:]
    response = list(tokenizer(example.response, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
    return {"input_ids": prompt + response, "completion_mask": [0] * len(prompt) + [1] * len(response)}
