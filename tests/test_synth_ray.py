"""`gp data synth --executor ray`: candidates validated as Ray tasks on a private local cluster give the same
tasks as the local threads (same ids, same FAIL_TO_PASS), and nothing is left under HOME/.ray."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graph_planner.config.schema import RunConfig
from graph_planner.synth.ray_validate import chunks
from graph_planner.synth.synth import SynthOptions, synthesize

ROOT = Path(__file__).resolve().parents[1]


def test_chunks_cover_every_candidate_once_in_order():
    parts = chunks(23, slots=2)
    assert [i for part in parts for i in part] == list(range(23))
    assert len(parts) == 4 and chunks(0, 2) == [] and len(chunks(3, slots=8)) == 3


@pytest.mark.ray
@pytest.mark.slow
def test_ray_validation_gives_the_local_tasks(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    for key in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(key, raising=False)
    repo = ROOT / "datasets/sample/repos/minicfg"
    config = RunConfig.model_validate({"resources": {"ray_num_cpus": 2}})
    made = {}
    for executor in ("local", "ray"):
        options = SynthOptions(seed=3, per_target=1, workers=2, executor=executor, ray_config=config)
        records, _rejected, stats, staging = synthesize([repo], options)
        shutil.rmtree(staging)
        made[executor] = {r.task_id: r.fail_to_pass for r in records}
        assert stats.judged == stats.candidates  # no cap: every candidate judged on both paths
    assert made["ray"] and made["ray"] == made["local"]
    assert not (tmp_path / "home" / ".ray").exists()
