"""A refused run changes nothing: every check that can refuse (the run lock, "already trained", bad input) comes
before anything is written into the run's directory, and only the run that holds the lock writes its
resolved_config.yaml (the file the docs tell users to reproduce and resume from).

Each test takes the bytes and mtimes of every file of the live run before and after the refused command.
Training runs for real (toy model) with the scripted rollout of tests/test_run_dirs.py instead of env episodes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import test_run_dirs
import yaml
from lock_holder import lock_held_elsewhere
from test_run_dirs import TINY, gp_train
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.env.samples import LOCAL_DEBUG_CONFIG

TESTS = Path(__file__).resolve().parent
cache_dir, scripted = test_run_dirs.cache_dir, test_run_dirs.scripted  # the fixtures: one toy cache, scripted rollouts


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` (hidden ones and the lock included): its bytes and mtime."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def changed(before: dict[str, tuple[bytes, int]], after: dict[str, tuple[bytes, int]]) -> list[str]:
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def test_train_refused_on_a_finished_run_changes_none_of_its_files(tmp_path, cache_dir, scripted):
    runs = tmp_path / "runs"
    first = gp_train(runs, cache_dir, "--run-name", "done")
    assert first.exit_code == 0, first.output
    run_dir = runs / "done"
    before = snapshot(run_dir)
    assert {"resolved_config.yaml", "metrics.jsonl", ".lock"} <= set(before)
    time.sleep(0.05)  # a rewrite would show in the mtime even with the same bytes
    again = gp_train(runs, cache_dir, "--run-name", "done", "--set", "training.lr=0.5", "--set", "experiment.seed=7")
    assert again.exit_code == 2, again.output
    assert "already holds a training run" in again.output
    assert changed(before, snapshot(run_dir)) == []
    config = yaml.safe_load((run_dir / "resolved_config.yaml").read_text())
    assert config["experiment"]["seed"] == 42 and config["training"]["lr"] != 0.5  # the run that trained


def test_a_bad_config_or_missing_data_writes_no_run_dir(tmp_path, cache_dir):
    runs = tmp_path / "runs"
    for extra in (["--set", "training.lr=inf"], ["--set", "training.group_size=1"],
                  ["--set", f"paths.dataset_train={tmp_path / 'missing.jsonl'}"],
                  ["--model-path", str(tmp_path / "no-such-model")]):
        result = CliRunner().invoke(app, ["train", "--output-dir", str(runs), "--set",
                                          f"paths.cache_dir={cache_dir}", *TINY, *extra])
        assert result.exit_code == 2, (extra, result.output)
        assert "Traceback" not in result.output
        assert not runs.exists() or list(runs.iterdir()) == [], (extra, list(runs.iterdir()))


@pytest.fixture(scope="module")
def prepared(bundled_samples) -> Path:
    return bundled_samples / "swebench" / "test.jsonl"


def _eval(tmp_path: Path, prepared: Path, *extra: str):
    return CliRunner().invoke(app, [
        "eval", "-c", str(LOCAL_DEBUG_CONFIG), "--dataset", str(prepared), "--limit", "1", "--run-name", "live",
        "--output-dir", str(tmp_path / "runs"), "--set", "backends.planner_backend=rule",
        "--set", "backends.cgm_backend=gold", "--set", f"paths.cache_dir={tmp_path / 'cache'}", *extra])


def test_eval_refused_by_a_held_lock_changes_nothing_and_loads_no_model(tmp_path, prepared):
    live = _eval(tmp_path, prepared)
    assert live.exit_code == 0, live.output
    run_dir = tmp_path / "runs" / "live"
    before = snapshot(run_dir)
    assert {"resolved_config.yaml", "eval/results.jsonl", "eval/report.json"} <= set(before)
    fresh_cache = tmp_path / "refused-cache"
    with lock_held_elsewhere(run_dir / "eval") as holder:  # the live eval, still running
        before = snapshot(run_dir)
        started = time.monotonic()
        refused = _eval(tmp_path, prepared, "--set", "backends.planner_backend=toy", "--set",
                        "backends.cgm_backend=oracle", "--set", "eval.model_name=other",
                        "--set", f"paths.cache_dir={fresh_cache}")
        seconds = time.monotonic() - started
        assert refused.exit_code == 4, refused.output
        assert f"in use by pid {holder}" in " ".join(refused.output.split())
        assert changed(before, snapshot(run_dir)) == []
    assert not fresh_cache.exists(), "the refused run built or loaded the toy model"
    assert seconds < 60, seconds


def test_eval_with_a_missing_dataset_leaves_no_run_dir(tmp_path):
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["eval", "--dataset", str(tmp_path / "nope.jsonl"), "--output-dir", str(runs)])
    assert result.exit_code == 2 and "eval dataset not found" in result.output
    assert not runs.exists()


# A `gp train` in its own process whose rollouts wait until the test has run the second one (the file ``release``
# appears; at most 120 s), so the second always starts while the first trains, however slow its start-up.
SLOW_TRAIN = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {tests!r})
    from test_run_dirs import PromptTask, scripted_rollout
    from graph_planner.training.local import rollout

    def slow(policy, tasks, group_size):
        deadline = time.monotonic() + 120
        while not os.path.exists({release!r}) and time.monotonic() < deadline:
            time.sleep(0.1)
        return scripted_rollout(policy, tasks, group_size)

    rollout.make_env_rollout = lambda config: ([PromptTask(0), PromptTask(1)], slow)
    from graph_planner.cli import app
    sys.argv = ["gp", *sys.argv[1:]]
    app()
""")


@pytest.mark.slow
def test_two_trains_at_once_the_second_is_refused_and_leaves_the_first_runs_config(tmp_path, cache_dir):
    runs = tmp_path / "runs"
    args = ["train", "--output-dir", str(runs), "--run-name", "both", "--set", f"paths.cache_dir={cache_dir}", *TINY]
    release = tmp_path / "release"
    script = SLOW_TRAIN.format(tests=str(TESTS), release=str(release))
    first = subprocess.Popen([sys.executable, "-c", script, *args, "--set", "experiment.seed=1"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run_dir = runs / "both"
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "resolved_config.yaml").is_file():  # written once the first run holds the lock
            assert first.poll() is None and time.monotonic() < deadline, "first gp train did not start"
            time.sleep(0.2)
        config_before = snapshot(run_dir)["resolved_config.yaml"]
        second = subprocess.run([sys.executable, "-c", script, *args, "--set", "experiment.seed=2"],
                                capture_output=True, text=True, timeout=300)
        assert second.returncode == 4, second.stdout + second.stderr
        assert f"in use by pid {first.pid}" in " ".join(second.stderr.split())
        assert "Traceback" not in second.stderr
        assert snapshot(run_dir)["resolved_config.yaml"] == config_before
        assert first.poll() is None, "the first gp train ended before the second was refused"
        release.touch()
        out, _ = first.communicate(timeout=300)
        assert first.returncode == 0, out
    finally:
        if first.poll() is None:
            first.kill()
    assert yaml.safe_load((run_dir / "resolved_config.yaml").read_text())["experiment"]["seed"] == 1
    assert os.path.isdir(run_dir / "checkpoints" / "step_1")
