"""Concurrent rollouts (``parallel.parallel_agents`` > 1): episodes play in their own threads and sandboxes while
the batcher answers every playing episode with one ``generate_batch`` call per round.

What a user relies on: every episode gets the answer to its own prompt, a failure reaches the episodes it
concerns instead of hanging the step, and a seeded run samples the same episodes every time (thread timing
decides nothing).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from graph_planner.config.loader import load_run_config
from graph_planner.config.schema import SamplingConfig
from graph_planner.env.samples import SAMPLE_DIR
from graph_planner.training.local.batched_generation import GenerationBatcher
from graph_planner.training.local.policy_handle import Generation


class RecordingHandle:
    """A policy handle (no model) that answers each prompt with itself and records every batch it was given."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.fail = fail

    def generate_batch(self, prompts, sampling, n=1):
        self.batches.append([p[0]["content"] for p in prompts])
        if self.fail:
            raise RuntimeError("engine lost")
        return [[Generation(f"answer to {p[0]['content']}", [], [], [])] for p in prompts]

    def finish_reason(self, response_ids, sampling):
        return "stop"  # its answers are never cut at a length limit


def play_members(batcher: GenerationBatcher, turns: list[int]) -> dict[int, list[object]]:
    """Member i asks ``turns[i]`` times, then leaves; returns what each member got (answers or errors)."""
    got: dict[int, list[object]] = {i: [] for i in range(len(turns))}

    def member(i: int) -> None:
        try:
            for k in range(turns[i]):
                prompt = [{"role": "user", "content": f"m{i}-t{k}"}]
                try:
                    got[i].append(batcher.member(i).generate(prompt, SamplingConfig()).text)
                except RuntimeError as exc:
                    got[i].append(exc)
                    return
        finally:
            batcher.leave(i)

    threads = [threading.Thread(target=member, args=(i,)) for i in reversed(range(len(turns)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a member is still waiting: the batcher hung"
    return got


def test_each_round_is_one_call_over_every_playing_member_in_member_order():
    handle = RecordingHandle()
    got = play_members(GenerationBatcher(handle, 3), turns=[1, 3, 2])
    assert got == {0: ["answer to m0-t0"], 1: ["answer to m1-t0", "answer to m1-t1", "answer to m1-t2"],
                   2: ["answer to m2-t0", "answer to m2-t1"]}
    # members that finished are not waited for; the rest still share one call
    assert handle.batches == [["m0-t0", "m1-t0", "m2-t0"], ["m1-t1", "m2-t1"], ["m1-t2"]]


def test_a_member_leaving_without_asking_does_not_block_the_others():
    handle = RecordingHandle()
    got = play_members(GenerationBatcher(handle, 3), turns=[2, 0, 1])
    assert got[0] == ["answer to m0-t0", "answer to m0-t1"] and got[2] == ["answer to m2-t0"]
    assert handle.batches == [["m0-t0", "m2-t0"], ["m0-t1"]]


def test_a_failed_generation_reaches_every_member_of_the_call():
    got = play_members(GenerationBatcher(RecordingHandle(fail=True), 2), turns=[2, 2])
    assert all(len(answers) == 1 and isinstance(answers[0], RuntimeError) for answers in got.values())


def test_an_interrupt_inside_generation_leaves_no_member_waiting():
    class Interrupted(RecordingHandle):
        def generate_batch(self, prompts, sampling, n=1):
            raise KeyboardInterrupt

    batcher = GenerationBatcher(Interrupted(), 2)
    seen: list[BaseException] = []

    def member(i: int) -> None:
        try:
            batcher.member(i).generate([{"role": "user", "content": str(i)}], SamplingConfig())
        except BaseException as exc:
            seen.append(exc)
        finally:
            batcher.leave(i)

    threads = [threading.Thread(target=member, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads) and len(seen) == 2
    assert all(isinstance(exc, KeyboardInterrupt) for exc in seen)


def test_a_failing_episode_is_raised_after_the_others_of_its_chunk_finished():
    """One episode's error must not hang the round the others wait in, nor cut their episodes short."""
    from graph_planner.training.local.rollout import play_concurrently

    finished: list[str] = []

    def play(task, chat):
        for turn in range(2):
            chat.chat([{"role": "user", "content": f"{task}-{turn}"}])
            if task == "bad":
                raise ValueError("sandbox lost")
        finished.append(task)
        return task

    config = load_run_config(None, {})
    with pytest.raises(ValueError, match="sandbox lost"):
        play_concurrently(play, RecordingHandle(), config, ["a", "bad", "c"], concurrency=3)
    assert sorted(finished) == ["a", "c"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    from graph_planner.data.prepare import prepare_datasets

    out = tmp_path_factory.mktemp("prepared")
    config = load_run_config(None, {"data.r2e_dataset": str(SAMPLE_DIR / "r2e" / "train.jsonl"),
                                    "data.swebench_dataset": str(SAMPLE_DIR / "swebench" / "test.jsonl"),
                                    "data.repos_dir": str(SAMPLE_DIR / "repos"), "data.r2e_val_size": 0})
    prepare_datasets(config.data, out_dir=out)
    return out / "r2e_gym"


def test_concurrent_env_rollouts_batch_generation_and_repeat_under_the_same_seed(tmp_path, prepared):
    """Real sandboxes, real tests, the toy model: 2 tasks x 3 episodes play at once; generation is batched and the
    same seed gives the same trajectories, whatever order the threads ran in."""
    from graph_planner.training.local.rollout import make_env_rollout
    from graph_planner.training.local.trainer import LocalGRPOTrainer

    config = load_run_config(None, {
        "experiment.run_name": "concurrent", "logging.output_dir": str(tmp_path / "runs"),
        "paths.cache_dir": str(tmp_path / "cache"), "paths.dataset_train": str(prepared / "train.jsonl"),
        "paths.planner_model": "toy", "backends.planner_backend": "toy", "backends.cgm_backend": "oracle",
        "training.backend": "local", "training.train_batch_size": 2, "training.group_size": 3,
        "training.env_groups": 2, "training.torch_threads": 1, "training.max_prompt_length": 128,
        "planner_sampling.max_new_tokens": 12, "training.max_response_length": 12, "env.max_steps": 2,
        "parallel.parallel_agents": 6, "parallel.workflow_parallel": 6})
    tasks, rollout_fn = make_env_rollout(config)
    trainer = LocalGRPOTrainer(config, rollout_fn, tasks)
    calls: list[int] = []
    generate_batch = trainer.policy.generate_batch

    def counting(prompts, sampling, n=1):
        calls.append(len(prompts))
        return generate_batch(prompts, sampling, n)

    trainer.policy.generate_batch = counting
    step_tasks = tasks[:2]
    runs = []
    for _ in range(2):
        torch.manual_seed(11)
        trajectories = trainer.rollout(step_tasks)
        runs.append([(t.task_id, [turn.response_token_ids for turn in t.turns], t.reward) for t in trajectories])
    assert [task_id for task_id, _, _ in runs[0]] == [t.task_id for t in step_tasks for _ in range(3)]
    assert runs[0] == runs[1]
    assert calls[0] == 6 and max(calls) == 6  # the first round asks for all six episodes at once
