"""A full or read-only disk is the user's disk, not a bug: one line naming the path and the free space, exit 5,
no traceback, and no 0-byte or cut file where a reader would trust it; an empty config file is an error.

The disks are real: a 1 MiB tmpfs filled to the last byte, and a tmpfs remounted read-only (root ignores chmod).
Mounting needs root (CAP_SYS_ADMIN); where it fails, the tests that need it are skipped saying so."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config.loader import load_run_config, owned_run
from graph_planner.disk import DiskError, atomic_write_text, check_output_dir, find_disk_error
from graph_planner.env.samples import LOCAL_DEBUG_CONFIG


def _mount_tmpfs(where: Path, size: str = "1M") -> None:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): needs root")


def _umount(where: Path) -> None:
    if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs with 0 bytes free."""
    disk = tmp_path / "full"
    _mount_tmpfs(disk)
    try:
        fd = os.open(disk / ".filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        yield disk
    finally:
        _umount(disk)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "ro"
    _mount_tmpfs(disk)
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        yield disk
    finally:
        _umount(disk)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != ".filler")


def one_error_line(output: str) -> str:
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    return errors[0]


def test_gp_train_on_a_full_disk_is_one_line_exit_5_and_leaves_no_empty_config(full_disk, tmp_path, monkeypatch):
    from test_run_dirs import TINY, PromptTask, scripted_rollout

    from graph_planner.training.local import rollout

    monkeypatch.setattr(rollout, "make_env_rollout", lambda config: ([PromptTask(0), PromptTask(1)], scripted_rollout))
    result = CliRunner().invoke(app, ["train", "--output-dir", str(full_disk), "--run-name", "t",
                                      "--set", f"paths.cache_dir={tmp_path / 'cache'}", *TINY])
    assert result.exit_code == 5, result.output
    line = one_error_line(result.output)
    assert line == f"error: cannot write {full_disk / 't' / 'resolved_config.yaml'}: no space left on device (0 B free)"
    assert files_under(full_disk) == ["t/.lock"]  # no 0-byte resolved_config.yaml, no temp file


def test_gp_eval_into_a_read_only_dir_is_one_line_exit_5(read_only_dir, tmp_path, bundled_samples):
    prepared = bundled_samples / "swebench" / "test.jsonl"
    result = CliRunner().invoke(app, ["eval", "-c", str(LOCAL_DEBUG_CONFIG), "--dataset", str(prepared), "--limit",
                                      "1", "--output-dir", str(read_only_dir), "--run-name", "e",
                                      "--set", "backends.planner_backend=rule", "--set", "backends.cgm_backend=gold"])
    assert result.exit_code == 5, result.output
    assert one_error_line(result.output) == f"error: cannot write {read_only_dir / 'e'}: read-only file system"


def test_gp_grade_checks_its_report_dir_before_grading(read_only_dir, tmp_path, bundled_samples):
    from graph_planner.data.io import read_task_records

    prepared = bundled_samples / "swebench" / "test.jsonl"
    predictions = tmp_path / "gold.jsonl"
    predictions.write_text("".join(json.dumps({"instance_id": t.task_id, "model_patch": t.gold_patch,
                                               "model_name_or_path": "gold"}) + "\n"
                                   for t in read_task_records(prepared)))
    started = time.monotonic()
    result = CliRunner().invoke(app, ["grade", "--dataset", str(prepared), "--predictions", str(predictions),
                                      "--sandbox", "local", "--report", str(read_only_dir / "grade" / "r.json")])
    assert result.exit_code == 5, result.output
    assert one_error_line(result.output) == f"error: cannot write {read_only_dir / 'grade'}: read-only file system"
    assert "resolved" not in result.output  # nothing was graded (the work would have been lost)
    assert time.monotonic() - started < 60


def test_atomic_writes_on_a_full_disk_keep_the_old_file_and_leave_no_temp(tmp_path):
    disk = tmp_path / "d"
    _mount_tmpfs(disk)
    try:
        atomic_write_text(disk / "predictions.jsonl", '{"old": 1}\n')
        fd = os.open(disk / ".filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        with pytest.raises(DiskError) as caught:
            atomic_write_text(disk / "predictions.jsonl", "x" * 200_000)
        assert caught.value.filename == str(disk / "predictions.jsonl")
        assert find_disk_error(RuntimeError("wrapped")) is None
        try:
            raise RuntimeError("episode failed") from caught.value
        except RuntimeError as wrapped:
            assert find_disk_error(wrapped) is caught.value
        assert (disk / "predictions.jsonl").read_text() == '{"old": 1}\n'
        assert files_under(disk) == ["predictions.jsonl"]
        with pytest.raises(DiskError) as full:
            check_output_dir(disk / "run")
        assert full.value.filename == str(disk / "run") and full.value.errno == errno.ENOSPC
    finally:
        _umount(disk)


def test_the_room_check_refuses_a_disk_with_too_little_space(tmp_path):
    disk = tmp_path / "small"
    _mount_tmpfs(disk, size="2M")
    try:
        with pytest.raises(DiskError) as caught:
            check_output_dir(disk / "run")  # writable, but under MIN_FREE_BYTES
        from graph_planner.disk import disk_error_line

        assert disk_error_line(caught.value).startswith(f"cannot write {disk / 'run'}: not enough space left on "
                                                        "device (needs at least 64.0 MiB free) (")
    finally:
        _umount(disk)


def test_an_empty_config_file_is_an_error_naming_it(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    result = CliRunner().invoke(app, ["config", "-c", str(empty), "--output-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2
    assert f"error: {empty}: the config file is empty" in result.output
    assert not (tmp_path / "runs").exists()


def test_the_owner_removes_stale_temp_files_on_start(tmp_path):
    config = load_run_config(None, {"logging.output_dir": str(tmp_path), "experiment.run_name": "r"})
    run_dir, eval_dir = tmp_path / "r", tmp_path / "r" / "eval"
    eval_dir.mkdir(parents=True)
    stale = [run_dir / ".resolved_config.yaml.k2j3.tmp", eval_dir / "predictions.jsonl.tmp"]
    for path in stale:
        path.write_text("")
    keep = eval_dir / "results.jsonl"
    keep.write_text("{}\n")
    with owned_run(config, lock_dir="eval"):
        pass
    assert not any(p.exists() for p in stale) and keep.read_text() == "{}\n"
    assert (run_dir / "resolved_config.yaml").stat().st_size > 0


def test_a_disk_error_in_an_episode_stops_the_eval_instead_of_becoming_error_rows(tmp_path, monkeypatch,
                                                                                 bundled_samples):
    """Simulated ENOSPC from the trajectory writer (a real disk cannot be made to fill up at that exact moment):
    the run stops with exit 5 and no agent_error row; a resume plays the task again."""
    from graph_planner.env import replay

    def no_space(path, trajectory):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(replay, "write_trajectory_jsonl", no_space)
    prepared = bundled_samples / "swebench" / "test.jsonl"
    result = CliRunner().invoke(app, ["eval", "-c", str(LOCAL_DEBUG_CONFIG), "--dataset", str(prepared), "--limit",
                                      "1", "--output-dir", str(tmp_path / "runs"), "--run-name", "e",
                                      "--set", "backends.planner_backend=rule", "--set", "backends.cgm_backend=gold",
                                      "--set", f"paths.cache_dir={tmp_path / 'cache'}"])
    assert result.exit_code == 5, result.output
    assert "no space left on device" in one_error_line(result.output)
    results = tmp_path / "runs" / "e" / "eval" / "results.jsonl"
    assert not results.exists() or results.read_text() == ""
