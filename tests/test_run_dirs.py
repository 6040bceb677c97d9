"""Run directories that don't mix: an unnamed run gets its own ``<name>-<UTC stamp>`` dir (decided once, kept by
its resolved config, ``<name>-latest`` at the newest, in no cache key); a named run keeps ``<run_name>`` and
training there refuses to clobber an earlier run unless it resumes.

`gp train` runs for real (toy model, one step) with a scripted rollout instead of env episodes, so each run takes
a second or two."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import get_args

import pytest
import torch
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config.loader import load_run_config
from graph_planner.config.run_dirs import claim_run_dir, latest_run_dir, refuse_clobber
from graph_planner.config.schema import Stage
from graph_planner.episode.turns import Trajectory, Turn

STAMPED = re.compile(r"graph-planner-\d{8}-\d{6}(-\d+)?")
TINY = ["--set", "training.total_steps=1", "--set", "training.total_epochs=10", "--set", "training.train_batch_size=2",
        "--set", "training.ppo_mini_batch_size=2", "--set", "training.group_size=2", "--set", "logging.save_interval=1",
        "--set", "training.torch_threads=1", "--set", "logging.log_backend=jsonl"]


class PromptTask:
    def __init__(self, i: int) -> None:
        self.task_id = f"prompt-{i}"
        self.ids = [3, 10 + i, 20 + i, 5]


def scripted_rollout(policy, tasks, group_size):
    """Fixed responses with rewards by position: GRPO has something to update, no env runs."""
    out = []
    for t, task in enumerate(tasks):
        for k in range(group_size):
            turn = Turn(prompt_messages=[], response_text="", action=None, observation="",
                        prompt_token_ids=task.ids, response_token_ids=[30 + k, 40 + t])
            out.append(Trajectory(task_id=task.task_id, turns=[turn], reward=float(k % 2)))
    return out


@pytest.fixture(scope="module")
def cache_dir(shared_model_cache) -> str:
    """The session's toy cache (built once for the suite; no test here writes into it)."""
    return str(shared_model_cache)


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    from graph_planner.training.local import rollout

    monkeypatch.setattr(rollout, "make_env_rollout", lambda config: ([PromptTask(0), PromptTask(1)], scripted_rollout))
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # training.torch_threads=1 sets it process-wide


def gp_train(runs: Path, cache_dir: str, *extra: str):
    result = CliRunner().invoke(app, ["train", "--output-dir", str(runs), "--set", f"paths.cache_dir={cache_dir}",
                                      *TINY, *extra])
    return result


def trained_run_dir(output: str) -> Path:
    return Path(re.search(r"checkpoints in (\S+)/checkpoints", output).group(1))


def test_two_unnamed_gp_train_runs_get_two_dirs_and_latest_points_at_the_second(tmp_path, cache_dir, scripted):
    runs = tmp_path / "runs"
    first, second = gp_train(runs, cache_dir), gp_train(runs, cache_dir)
    assert first.exit_code == 0, first.output
    assert second.exit_code == 0, second.output
    dirs = sorted(p for p in runs.iterdir() if not p.is_symlink())
    assert [trained_run_dir(first.output), trained_run_dir(second.output)] == dirs  # the stamps sort by time
    assert all(STAMPED.fullmatch(d.name) for d in dirs), dirs
    for run_dir in dirs:
        assert (run_dir / "checkpoints" / "step_1" / "model").is_dir() and (run_dir / "metrics.jsonl").is_file()
    latest = runs / "graph-planner-latest"
    assert latest.is_symlink() and latest.resolve() == dirs[1].resolve()


def test_a_named_run_refuses_to_clobber_then_resumes_with_resume_from_auto(tmp_path, cache_dir, scripted):
    runs = tmp_path / "runs"
    assert gp_train(runs, cache_dir, "--run-name", "mine").exit_code == 0
    again = gp_train(runs, cache_dir, "--run-name", "mine")
    assert again.exit_code == 2
    assert f"run directory {runs / 'mine'} already holds a training run (checkpoints, metrics.jsonl)" in again.output
    assert "--set training.resume_from=auto" in again.output and "--run-name NAME" in again.output
    resumed = gp_train(runs, cache_dir, "--run-name", "mine", "--set", "training.total_steps=2",
                       "--set", "training.resume_from=auto")
    assert resumed.exit_code == 0, resumed.output
    assert "trained to step 2" in resumed.output and (runs / "mine" / "checkpoints" / "step_2").is_dir()
    assert sorted(p.name for p in runs.iterdir()) == ["mine"]  # no stamped dir, no latest link


def test_the_resolved_config_reloads_to_the_same_dir(tmp_path):
    config = load_run_config(None, {"logging.output_dir": str(tmp_path)}, write=True)
    run_dir = Path(config.resolved_run_dir)
    assert STAMPED.fullmatch(run_dir.name) and run_dir.parent == tmp_path
    for write in (False, True):  # a resume or any later step from that file: the same dir, no new one
        again = load_run_config(config.resolved_config_path, yaml_only=True, write=write)
        assert again.resolved_run_dir == str(run_dir)
    assert [p for p in tmp_path.iterdir() if not p.is_symlink()] == [run_dir]
    moved = load_run_config(config.resolved_config_path, {"logging.output_dir": str(tmp_path / "other")})
    assert Path(moved.resolved_run_dir).parent == tmp_path / "other"  # not this output dir's run any more


def test_same_second_runs_get_suffixes_and_latest_falls_back_to_a_file(tmp_path, monkeypatch):
    now = datetime(2026, 11, 26, 9, 30, 5, tzinfo=timezone.utc)
    configs = [load_run_config(None, {"logging.output_dir": str(tmp_path)}) for _ in range(3)]
    assert [claim_run_dir(c, now).name for c in configs[:2]] == ["graph-planner-20261126-093005",
                                                                  "graph-planner-20261126-093005-2"]
    assert latest_run_dir(configs[0]) == tmp_path / "graph-planner-20261126-093005-2"

    def no_symlinks(self, target, target_is_directory=False):
        raise OSError("symlinks not supported here")

    monkeypatch.setattr(Path, "symlink_to", no_symlinks)
    third = claim_run_dir(configs[2], now)
    assert third.name == "graph-planner-20261126-093005-3"
    assert (tmp_path / "graph-planner-latest").read_text().strip() == third.name
    assert latest_run_dir(configs[2]) == third


def test_the_run_dir_is_in_no_cache_key(tmp_path):
    from tasks.caching import ConfigKeys

    first = load_run_config(None, {"logging.output_dir": str(tmp_path)}, write=True)
    second = load_run_config(None, {"logging.output_dir": str(tmp_path)}, write=True)
    assert first.resolved_run_dir != second.resolved_run_dir
    for stage in get_args(Stage):
        keys = [ConfigKeys.for_stage(stage).compute_key(None, {"config_file": c.resolved_config_path}, {})
                for c in (first, second)]
        assert keys[0] == keys[1], stage  # a second pipeline run of the same config is served from the cache


def test_eval_dirs_and_resume_paths_are_not_refused(tmp_path):
    run_dir = tmp_path / "mine"
    (run_dir / "eval").mkdir(parents=True)
    (run_dir / "resolved_config.yaml").write_text("{}")
    refuse_clobber(run_dir, None)  # a config and an eval are no training run
    (run_dir / "checkpoints" / "step_1").mkdir(parents=True)
    refuse_clobber(run_dir, "auto")
    refuse_clobber(run_dir, str(run_dir / "checkpoints" / "step_1"))
