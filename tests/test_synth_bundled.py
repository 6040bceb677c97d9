"""The committed synthesised tasks (datasets/sample/synth): their task repositories are rebuilt exactly, the split
holds code locations apart, and the data source uses them only for the options they were made with."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from graph_planner.config.schema import DataConfig
from graph_planner.env.samples import SAMPLE_DIR
from graph_planner.synth.bundled import BUNDLED_DIR, SPLITS, load_bundle
from graph_planner.synth.source import _bundled
from graph_planner.synth.synth import SynthOptions
from graph_planner.synth.validate import SynthInputError

REPOS = [SAMPLE_DIR / "repos" / name for name in ("textkit", "invcalc", "minicfg")]


def _rows() -> list[dict]:
    return [json.loads(line) for split in SPLITS
            for line in (BUNDLED_DIR / f"{split}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def test_no_code_location_of_a_held_out_split_has_a_training_task():
    rows = _rows()
    by_split: dict[str, set[str]] = {s: {r["metadata"]["location"] for r in rows if r["split"] == s} for s in SPLITS}
    assert all(by_split.values())
    assert not by_split["train"] & (by_split["val"] | by_split["test"])
    assert not by_split["val"] & by_split["test"]
    # symptoms only: no problem statement names the file or function its bug is in
    for row in rows:
        synth = row["metadata"]["synth"]
        assert synth["path"] not in row["problem_statement"]
        assert synth["target"] not in row["problem_statement"]


def test_the_data_source_rebuilds_every_committed_task_at_its_base_commit(tmp_path):
    data = DataConfig(synth_repos=[str(r) for r in REPOS], synth_val_frac=0.2, synth_test_frac=0.2, max_steps=5)
    out = _bundled(data, SynthOptions(seed=0, per_target=2, val_frac=0.2, test_frac=0.2, max_steps=5))
    assert out is not None
    records, rejected = out
    committed = {r["task_id"]: r for r in _rows()}
    assert len(records) == len(committed) and rejected
    for record in records:  # load_bundle checks each rebuilt commit; the split is the committed one
        assert record.split == committed[record.task_id]["split"] and record.max_steps == 5
        assert Path(record.repo_path, ".git").is_dir()


def test_other_options_are_not_answered_from_the_committed_set():
    data = DataConfig(synth_repos=[str(r) for r in REPOS])
    assert _bundled(data, SynthOptions(seed=1, per_target=2)) is None
    assert _bundled(data, SynthOptions(seed=0, per_target=1)) is None
    assert _bundled(DataConfig(synth_repos=[str(REPOS[0])]), SynthOptions(seed=0, per_target=2)) is None


def test_an_edited_source_tree_is_refused_naming_the_task(tmp_path):
    edited = tmp_path / "textkit"
    shutil.copytree(REPOS[0], edited, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    target = next(r for r in _rows() if r["repo"] == "textkit")["metadata"]["synth"]["path"]
    (edited / target).write_text((edited / target).read_text(encoding="utf-8") + "\nEDITED = 1\n", encoding="utf-8")
    sources = {"textkit": edited, "invcalc": REPOS[1], "minicfg": REPOS[2]}
    with pytest.raises(SynthInputError, match=r"synth__textkit-\w+: rebuilt as commit"):
        load_bundle(BUNDLED_DIR, sources, tmp_path / "staging", 0, 0.2, 0.2, 5)


def test_the_transfer_config_asks_for_exactly_the_committed_set():
    """make demo-transfer must not spend minutes synthesising: its data section matches manifest.json (an edited
    sample repository or option breaks this, and the set must then be regenerated, docs/data.md)."""
    from graph_planner.config.loader import load_run_config
    from graph_planner.synth.bundled import bundle_key, matches

    root = Path(__file__).resolve().parents[1]
    data = load_run_config(root / "configs" / "experiments" / "local_transfer.yaml").data
    assert matches(BUNDLED_DIR, bundle_key(list(data.synth_repos), data.synth_seed, data.synth_per_target,
                                           data.synth_max_tasks))
