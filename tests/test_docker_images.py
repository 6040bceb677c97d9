"""Images built on the real engine: sample images hold the repo at the task's base commit (rebuilt only when the
source changes); custom images from a BuildSpec (local repo or git URL, commit, setup commands without network);
every bundled sample task validates (gold resolves, empty does not) on the docker backend."""

from __future__ import annotations

import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from docker_fixtures import (  # noqa: F401 - pytest fixtures
    BASE_IMAGE,
    TINY_IMAGE,
    base_image,
    docker_client,
    docker_config,
    remove_images,
    tiny_dataset,
    tiny_task,
)

from graph_planner.data.gitrepo import commit_all, init_deterministic_repo
from graph_planner.data.record import BuildSpec
from graph_planner.sandbox.images import build_custom_image, build_sample_images

pytestmark = pytest.mark.docker
REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE = REPO_ROOT / "datasets" / "sample"


def run_in(client, image: str, command: str) -> str:
    return client.containers.run(image, ["sh", "-c", command], remove=True, network_disabled=True).decode()


def test_sample_image_holds_the_repo_at_the_task_base_commit(docker_client, tiny_dataset, tmp_path):  # noqa: F811
    copy = shutil.copytree(tiny_dataset / "repos" / "calc", tmp_path / "calc")
    base_commit = init_deterministic_repo(copy)
    assert run_in(docker_client, TINY_IMAGE, "git rev-parse HEAD && git status --porcelain").split() == [base_commit]
    task = tiny_task(base_commit=base_commit)
    assert [r.status for r in build_sample_images([task], tiny_dataset, client=docker_client)] == ["cached"]


def test_sample_image_is_rebuilt_when_its_source_changes(docker_client, tiny_dataset, tmp_path):  # noqa: F811
    dataset = tmp_path / "dataset"
    shutil.copytree(tiny_dataset / "repos", dataset / "repos")
    tag = f"gp-test/tiny-changed:{uuid.uuid4().hex[:8]}"
    task = tiny_task(image=tag)
    try:
        assert build_sample_images([task], dataset, client=docker_client)[0].status == "built"
        assert build_sample_images([task], dataset, client=docker_client)[0].status == "cached"
        (dataset / "repos/calc/calc/extra.py").write_text("Y = 2\n")
        assert build_sample_images([task], dataset, client=docker_client)[0].status == "built"
        assert run_in(docker_client, tag, "cat calc/extra.py") == "Y = 2\n"
        wrong = tiny_task(image=tag, base_commit="0" * 40)
        [failed] = build_sample_images([wrong], dataset, client=docker_client, force=True)
        assert failed.status == "failed" and "0000000000" in failed.reason
    finally:
        remove_images(docker_client, [tag])


def _two_commit_repo(path: Path) -> tuple[str, str]:
    path.mkdir()
    (path / "app.py").write_text("VERSION = 1\n")
    first = init_deterministic_repo(path)
    (path / "app.py").write_text("VERSION = 2\n")
    second = commit_all(path, "second")
    return first, second


@pytest.mark.parametrize("as_url", [False, True], ids=["local-path", "git-url"])
def test_custom_image_from_build_spec(docker_client, base_image, tmp_path, as_url):  # noqa: F811
    first, _ = _two_commit_repo(tmp_path / "proj")
    spec = BuildSpec(base_image=base_image, repo=f"file://{tmp_path / 'proj'}" if as_url else "proj",
                     commit=first, workdir="/work/proj",
                     setup_commands=["echo built > /opt/setup-marker", "ls /sys/class/net > /opt/nets"])
    tag = f"gp-test/custom:{uuid.uuid4().hex[:8]}"
    try:
        result = build_custom_image(spec, tag, base_dir=tmp_path, client=docker_client)
        assert result.status == "built", result.reason
        out = run_in(docker_client, tag, "pwd; git rev-parse HEAD; cat app.py /opt/setup-marker /opt/nets")
        assert out.split() == ["/work/proj", first, "VERSION", "=", "1", "built", "lo"]
    finally:
        remove_images(docker_client, [tag])


def test_failing_setup_command_is_reported_with_the_build_log(docker_client, base_image, tmp_path):  # noqa: F811
    _two_commit_repo(tmp_path / "proj")
    spec = BuildSpec(base_image=base_image, repo="proj", setup_commands=["echo about-to-fail", "exit 7"])
    result = build_custom_image(spec, f"gp-test/custom-fail:{uuid.uuid4().hex[:8]}", tmp_path, client=docker_client)
    assert result.status == "failed"
    assert "about-to-fail" in result.reason and "7" in result.reason


@pytest.mark.slow
def test_every_bundled_sample_task_validates_on_docker(docker_client, base_image, tmp_path):  # noqa: F811
    from graph_planner.config.schema import DataConfig
    from graph_planner.data.io import read_task_records
    from graph_planner.data.prepare import prepare_datasets
    from graph_planner.validation.validate import validate_tasks

    if not (SAMPLE / "swebench" / "test.jsonl").is_file():
        pytest.fail(f"bundled sample rows are missing under {SAMPLE}")
    data = DataConfig(r2e_dataset=str(SAMPLE / "r2e" / "train.jsonl"),
                      swebench_dataset=str(SAMPLE / "swebench" / "test.jsonl"), repos_dir=str(SAMPLE / "repos"))
    prepare_datasets(data, out_dir=tmp_path)
    splits = (tmp_path / "swebench" / "test.jsonl", tmp_path / "r2e_gym" / "train.jsonl")
    records = {split_file: read_task_records(split_file) for split_file in splits}
    for split_file in splits:  # one after the other: the two splits share images (same repos and commits)
        builds = build_sample_images(records[split_file], split_file.parent, client=docker_client)
        assert all(b.status in ("built", "cached") for b in builds), [b.reason for b in builds]
    # the two splits validate at once, each task in its own container (as gp eval's worker threads run them)
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(lambda split_file: validate_tasks(records[split_file], docker_config(),
                                                                  split_file.parent, backend="docker"), splits))
    failures = [(t.task_id, t.error) for report in reports for t in report.failed]
    assert all(t.backend == "docker" for report in reports for t in report.tasks)
    assert sum(len(report.tasks) for report in reports) >= 16 and failures == []


def test_gp_images_build_cli_builds_sample_and_custom_tasks(docker_client, base_image, tiny_dataset,  # noqa: F811
                                                            tmp_path):
    from typer.testing import CliRunner

    from graph_planner.cli import app
    from graph_planner.data.io import write_task_records

    shutil.copytree(tiny_dataset / "repos", tmp_path / "repos")
    _two_commit_repo(tmp_path / "proj")
    tag = f"gp-test/custom-cli:{uuid.uuid4().hex[:8]}"
    custom = tiny_task(task_id="custom-1", repo_path=None, image=tag,
                       build=BuildSpec(base_image=base_image, repo="proj", setup_commands=["true"]))
    prebuilt = tiny_task(task_id="prebuilt-1", repo_path=None, image="swebench/sweb.eval.x86_64.x_1776_y-1:latest")
    write_task_records(tmp_path / "test.jsonl", [tiny_task(), custom, prebuilt])
    try:
        result = CliRunner().invoke(app, ["images", "build", str(tmp_path / "test.jsonl")])
        assert result.exit_code == 0, result.output
        assert run_in(docker_client, tag, "git log --format=%s -1") == "second\n"
        failing = BuildSpec(base_image=base_image, repo="proj", setup_commands=["false"])
        write_task_records(tmp_path / "test.jsonl", [tiny_task(task_id="bad-1", repo_path=None, image=tag,
                                                               build=failing)])
        assert CliRunner().invoke(app, ["images", "build", str(tmp_path / "test.jsonl")]).exit_code == 1
    finally:
        remove_images(docker_client, [tag])
