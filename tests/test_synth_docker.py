"""Synthesised tasks on the docker backend, from the CLI: `gp images build` makes ONE image for every task of a
repository (the task repository with all task commits), each container checks out its own task's commit and keeps
no other task's objects, and `gp validate-tasks --sandbox docker` grades the gold patch resolved and the empty patch
unresolved on two tasks sharing that image."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from docker_fixtures import base_image, docker_client, remove_images  # noqa: F401 - pytest fixtures
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config.schema import SandboxConfig
from graph_planner.data.io import read_task_records
from graph_planner.sandbox.docker import DockerSandbox

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_synth_tasks_of_one_repo_share_one_image_and_validate_on_docker(docker_client, base_image,  # noqa: F811
                                                                        tmp_path):
    out = tmp_path / "prepared"
    made = runner.invoke(app, ["data", "synth", "--repo", str(ROOT / "datasets/sample/repos/minicfg"), "--out",
                               str(out), "--max-tasks", "2", "--val-frac", "0", "--test-frac", "0"])
    assert made.exit_code == 0, made.output
    records = read_task_records(out / "synth" / "train.jsonl")
    assert len(records) == 2 and records[0].base_commit != records[1].base_commit
    tags = {r.image for r in records}
    assert len(tags) == 1 and None not in tags
    [tag] = tags
    try:
        built = runner.invoke(app, ["images", "build", str(out / "synth")])
        assert built.exit_code == 0, built.output
        assert docker_client.images.get(tag).id  # ONE image, tagged once, for both tasks
        assert len({docker_client.images.get(t).id for t in tags}) == 1

        # each container starts at its own task's commit, and the other task's commit is not in it
        first, second = records
        with DockerSandbox(first, SandboxConfig(), out / "synth", "synth-docker-test") as box:
            assert box.exec("git rev-parse HEAD").stdout.strip() == first.base_commit
            assert not box.exec(f"git cat-file -e {second.base_commit}").ok
            assert box.exec("git log --all --format=%H").stdout.split() == [first.base_commit]

        report = tmp_path / "report.json"
        checked = runner.invoke(app, ["validate-tasks", str(out / "synth"), "--split", "train", "--sandbox",
                                      "docker", "--report", str(report)])
        assert checked.exit_code == 0, checked.output
        tasks = json.loads(report.read_text())["tasks"]
        assert sorted(t["task_id"] for t in tasks) == sorted(r.task_id for r in records)
        for task in tasks:
            assert task["ok"] and task["backend"] == "docker", task
            assert task["gold"]["resolved"] and not task["empty"]["resolved"], task
    finally:
        remove_images(docker_client, sorted(tags))


def test_the_image_holds_every_task_commit_of_the_repo(docker_client, base_image, tmp_path):  # noqa: F811
    """The split files are built one by one (`gp images build DIR` reads each): the image must hold the whole task
    repository, whichever file is built first, so a val task finds its commit in the image the train file built."""
    out = tmp_path / "prepared"
    made = runner.invoke(app, ["data", "synth", "--repo", str(ROOT / "datasets/sample/repos/minicfg"), "--out",
                               str(out), "--max-tasks", "3", "--val-frac", "0.34", "--test-frac", "0"])
    assert made.exit_code == 0, made.output
    source = out / "synth"
    records = [r for split in ("train", "val") if (source / f"{split}.jsonl").is_file()
               for r in read_task_records(source / f"{split}.jsonl")]
    [tag] = {r.image for r in records}
    try:
        only_val = runner.invoke(app, ["images", "build", str(source), "--split", "val"])
        assert only_val.exit_code == 0, only_val.output
        listing = docker_client.containers.run(tag, ["git", "for-each-ref", "--format=%(objectname)"],
                                               remove=True, network_disabled=True).decode().split()
        assert sorted(set(listing)) == sorted(r.base_commit for r in records)
        again = runner.invoke(app, ["images", "build", str(source)])
        assert again.exit_code == 0 and "built" not in again.output, again.output  # cached for every split
    finally:
        remove_images(docker_client, [tag])
