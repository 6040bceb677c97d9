"""prepare_datasets end to end over local HF files: counts, rejections, relative paths, determinism, repos."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import datasets
import pytest
from test_data_rows import r2e_dataset, r2e_row, r2e_rows, verified_row, write_r2e_parquet, write_verified_jsonl

from graph_planner.config.schema import DataConfig
from graph_planner.data.io import read_task_records
from graph_planner.data.prepare import PrepareError, prepare_datasets
from graph_planner.data.record import TaskRecord


@pytest.fixture(autouse=True)
def _hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    """5 good R2E rows + 3 malformed; 2 good Verified rows + 2 malformed; a custom task with its own repo."""
    r2e = r2e_rows(5) + [
        r2e_row(commit="e" * 40, expected_output_json="{bad"),
        r2e_row(commit="f" * 40, docker_image=""),
        r2e_row(commit="d" * 40, problem_statement=None),
    ]
    verified = [
        verified_row(),
        verified_row("sympy__sympy-20590"),
        verified_row("psf__requests-1", FAIL_TO_PASS="not json"),
        verified_row("psf__requests-2", problem_statement=""),
    ]
    custom_dir = tmp_path / "mine"
    (custom_dir / "toyrepo").mkdir(parents=True)
    (custom_dir / "toyrepo/app.py").write_text("x = 1\n")
    (custom_dir / "tasks.yaml").write_text(
        "- {task_id: toy-1, repo: me/toyrepo, problem_statement: fix, repo_path: toyrepo, split: train,"
        " fail_to_pass: ['t::a'], image: local/toy:1}\n"
        "- {task_id: toy-2, repo: me/toyrepo, problem_statement: fix2, repo_path: toyrepo, image: local/toyb:1,"
        " build: {base_image: 'gp-base:latest', repo: toyrepo}}\n"
    )
    repos = tmp_path / "repos"
    (repos / "mylib/mylib").mkdir(parents=True)
    (repos / "mylib/mylib/core.py").write_text("def add(a, b):\n    return a - b\n")
    (repos / "mylib/mylib/__pycache__").mkdir()
    (repos / "mylib/mylib/__pycache__/core.cpython-311.pyc").write_bytes(b"\0")
    return {
        "r2e": write_r2e_parquet(tmp_path / "in/r2e.parquet", r2e),
        "swebench": write_verified_jsonl(tmp_path / "in/verified.jsonl", verified),
        "custom": custom_dir / "tasks.yaml",
        "repos": repos,
    }


def _config(sources: dict[str, Path], out: Path, **kw) -> DataConfig:
    settings = {"output_dir": str(out), "r2e_dataset": str(sources["r2e"]), "swebench_dataset": str(sources["swebench"]),
                "custom_path": str(sources["custom"]), "repos_dir": str(sources["repos"])}
    return DataConfig(**{**settings, **kw})


def _tree_digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_prepare_writes_every_source_with_counts_rejections_and_manifests(sources, tmp_path: Path):
    out = tmp_path / "prepared"
    summary = prepare_datasets(_config(sources, out, r2e_val_size=2, max_steps=17))
    counts = {(s, split): (c.kept, c.rejected) for s, src in summary.sources.items() for split, c in src.splits.items()}
    # carved val = the first 2 rows (good); the 3 malformed rows are at the end of train
    assert counts == {("r2e_gym", "val"): (2, 0), ("r2e_gym", "train"): (3, 3), ("swebench", "test"): (2, 2),
                      ("custom", "test"): (1, 0), ("custom", "train"): (1, 0)}
    assert summary.total_kept == 9 and summary.total_rejected == 5 and not summary.nothing_kept

    val = read_task_records(out / "r2e_gym", "val")
    assert [r.metadata["row_index"] for r in val] == [0, 1] and {r.split for r in val} == {"val"}
    assert all(r.max_steps == 17 for r in val)
    rejected = [json.loads(line) for line in (out / "r2e_gym/rejected.jsonl").read_text().splitlines()]
    assert [(r["split"], r["row_index"], r["reason"].split(":")[0]) for r in rejected] == [
        ("train", 5, "expected_output_json"), ("train", 6, "docker_image"), ("train", 7, "problem_statement")]
    assert rejected[0]["task_id"] == "mylib__mylib-eeeeeeeeee" and rejected[0]["source"] == "r2e_gym"
    sweb_rejected = [json.loads(line) for line in (out / "swebench/rejected.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in sweb_rejected] == [
        "FAIL_TO_PASS: not a JSON list of test ids: Expecting value", "problem_statement: empty"]

    sweb = read_task_records(out / "swebench/test.jsonl")
    assert sweb[0].metadata["created_at"].startswith("2019-03-20T03:46:18")  # JSON reader made it a timestamp
    for split_file in ("r2e_gym/train.jsonl", "swebench/test.jsonl"):
        for record in read_task_records(out / split_file):
            instance = out / split_file.split("/")[0] / "instances" / f"{record.safe_id}.json"
            assert TaskRecord.model_validate_json(instance.read_text()) == record

    assert (out / "swebench/docker_images.txt").read_text() == (
        "swebench/sweb.eval.x86_64.django_1776_django-11099:latest\n"
        "swebench/sweb.eval.x86_64.sympy_1776_sympy-20590:latest\n")
    assert (out / "r2e_gym/docker_images_val.txt").read_text().count("\n") == 2
    assert (out / "custom/docker_images.txt").read_text() == "local/toy:1\n"  # toy-2 is build-only
    assert (out / "custom/docker_images_build.txt").read_text() == "local/toyb:1\n"
    top = (out / "docker_images.txt").read_text().splitlines()
    assert len(top) == len(set(top)) == 5 + 2 + 1 and summary.manifest == "docker_images.txt"
    assert json.loads((out / "swebench/summary.json").read_text())["splits"]["test"] == {
        "kept": 2, "rejected": 2, "path": "swebench/test.jsonl"}


def test_outputs_hold_relative_paths_only_and_repos_are_copied(sources, tmp_path: Path):
    out = tmp_path / "prepared"
    prepare_datasets(_config(sources, out))
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in {".jsonl", ".json", ".txt"}:
            assert str(tmp_path) not in path.read_text(), f"absolute path leaked into {path}"
    r2e = read_task_records(out / "r2e_gym/train.jsonl")
    assert {r.repo_path for r in r2e} == {"repos/mylib"}
    assert r2e[0].resolve_repo_path(out / "r2e_gym") == (out / "r2e_gym/repos/mylib").resolve()
    assert (out / "r2e_gym/repos/mylib/mylib/core.py").is_file()
    assert not (out / "r2e_gym/repos/mylib/mylib/__pycache__").exists()
    assert all(r.repo_path is None for r in read_task_records(out / "swebench/test.jsonl"))  # no django tree given
    custom = read_task_records(out / "custom", "test") + read_task_records(out / "custom", "train")
    assert {r.repo_path for r in custom} == {"repos/toyrepo"}
    assert [r.build.repo for r in custom if r.build] == ["repos/toyrepo"]
    assert (out / "custom/repos/toyrepo/app.py").read_text() == "x = 1\n"
    resolved = read_task_records(out / "custom", "test", resolve_paths=True)[0]
    assert Path(resolved.build.repo) == (out / "custom/repos/toyrepo").resolve()


def test_rerun_on_unchanged_input_gives_identical_files(sources, tmp_path: Path):
    out = tmp_path / "prepared"
    prepare_datasets(_config(sources, out, r2e_val_size=1))
    first = _tree_digest(out)
    prepare_datasets(_config(sources, out, r2e_val_size=1))
    assert _tree_digest(out) == first


def test_rerun_with_other_settings_drops_stale_splits_and_instances(sources, tmp_path: Path):
    out = tmp_path / "prepared"
    prepare_datasets(_config(sources, out, r2e_val_size=2))
    prepare_datasets(_config(sources, out, r2e_limit=2, swebench_limit=1))
    assert not (out / "r2e_gym/val.jsonl").exists() and not (out / "r2e_gym/docker_images_val.txt").exists()
    assert len(read_task_records(out / "r2e_gym/train.jsonl")) == 2
    assert len(list((out / "r2e_gym/instances").glob("*.json"))) == 2
    assert len(list((out / "swebench/instances").glob("*.json"))) == 1


def test_val_split_from_the_dataset_and_duplicates_are_rejected(tmp_path: Path):
    saved = tmp_path / "saved"
    datasets.DatasetDict({
        "train": r2e_dataset(r2e_rows(3)),  # rows 0..2
        "dev_10pr_v1": r2e_dataset(r2e_rows(2, 2)),  # rows 2..3: row 2 is also in train
    }).save_to_disk(str(saved))
    config = DataConfig(output_dir=str(tmp_path / "out"), r2e_dataset=str(saved), r2e_val_split="dev_10pr_v1",
                        skip_swebench=True)
    summary = prepare_datasets(config)
    assert summary.sources["r2e_gym"].splits["val"].kept == 2
    assert summary.sources["r2e_gym"].splits["train"].kept == 2
    rejected = json.loads((tmp_path / "out/r2e_gym/rejected.jsonl").read_text())
    assert rejected["split"] == "train" and rejected["reason"].startswith("task_id: duplicate of val row 0")
    assert read_task_records(tmp_path / "out/r2e_gym/val.jsonl")[0].metadata["hf_split"] == "dev_10pr_v1"


def test_skip_flags_and_impossible_settings(sources, tmp_path: Path):
    summary = prepare_datasets(_config(sources, tmp_path / "a", skip_r2e=True, custom_path=None))
    assert list(summary.sources) == ["swebench"] and not (tmp_path / "a/r2e_gym").exists()
    with pytest.raises(PrepareError, match="nothing to prepare"):
        prepare_datasets(_config(sources, tmp_path / "b", skip_r2e=True, skip_swebench=True, custom_path=None))
    with pytest.raises(PrepareError, match=r"r2e_val_size \(8\) must be smaller than the R2E rows read \(8"):
        prepare_datasets(_config(sources, tmp_path / "c", r2e_val_size=8))


def test_everything_rejected_is_reported_not_hidden(tmp_path: Path):
    path = write_verified_jsonl(tmp_path / "bad.jsonl", [verified_row(FAIL_TO_PASS="[]")])
    summary = prepare_datasets(DataConfig(output_dir=str(tmp_path / "out"), skip_r2e=True,
                                          swebench_dataset=str(path)))
    assert summary.nothing_kept and summary.total_rejected == 1
    assert (tmp_path / "out/swebench/test.jsonl").read_text() == ""
