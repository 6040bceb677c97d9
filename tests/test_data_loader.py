"""hf_loader: local parquet / jsonl / save_to_disk / hub-layout dirs, and a clear error for the hub offline."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
from test_data_rows import r2e_dataset, r2e_rows, verified_dataset, verified_row, write_r2e_parquet

from graph_planner.data.sources.hf_loader import DataSourceError, hf_token, iter_rows, load_rows


@pytest.fixture(autouse=True)
def _hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def test_local_parquet_keeps_hf_types_and_limit_cuts_rows(tmp_path: Path):
    path = write_r2e_parquet(tmp_path / "r2e.parquet", r2e_rows(5))
    dataset = load_rows(str(path), "train", limit=3)
    assert len(dataset) == 3
    assert dataset.features["num_non_test_lines"] == datasets.Value("int64")
    rows = list(iter_rows(dataset, batch_size=2))
    assert [r["commit_hash"] for r in rows] == [f"{i:010x}" + "a" * 30 for i in range(3)]
    assert rows[0]["modified_entity_summaries"][0]["start_lineno"] == 1


def test_saved_dataset_dict_picks_the_split_and_lists_splits_when_missing(tmp_path: Path):
    datasets.DatasetDict({"train": r2e_dataset(r2e_rows(3)), "dev": r2e_dataset(r2e_rows(2, 10))}).save_to_disk(
        str(tmp_path / "saved"))
    assert len(load_rows(str(tmp_path / "saved"), "dev")) == 2
    with pytest.raises(DataSourceError, match=r"no split 'val' \(splits: \['dev', 'train'\]\)"):
        load_rows(str(tmp_path / "saved"), "val")


def test_hub_layout_dir_and_jsonl_split_files(tmp_path: Path):
    hub = tmp_path / "SWE-bench_Verified"
    (hub / "data").mkdir(parents=True)
    verified_dataset([verified_row(), verified_row("astropy__astropy-1")]).to_parquet(
        str(hub / "data/test-00000-of-00001.parquet"))
    assert len(load_rows(str(hub), "test")) == 2
    flat = tmp_path / "flat"
    flat.mkdir()
    verified_dataset([verified_row()]).to_json(str(flat / "test.jsonl"))
    assert load_rows(str(flat), "test")[0]["instance_id"] == "django__django-11099"
    with pytest.raises(DataSourceError, match="could not load split .train."):
        load_rows(str(flat), "train")


def test_missing_local_path_is_not_sent_to_the_hub(tmp_path: Path):
    with pytest.raises(DataSourceError, match="dataset path not found"):
        load_rows(str(tmp_path / "nope.parquet"), "train")


def test_token_comes_from_config_else_env(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_TOKEN", "env-token")
    assert hf_token("cli-token") == "cli-token"
    assert hf_token(None) == "env-token"
    monkeypatch.delenv("HF_TOKEN")
    assert hf_token(None) is None
