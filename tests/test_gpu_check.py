"""scripts/gpu_check.{sh,py} (the GPU check, docs/training.md): what can be checked without a GPU."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scripts_parse_and_every_carried_wheel_is_pinned_in_the_lock():
    for script in ("gpu_check.sh", "gpu_wheels.sh"):
        subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)], check=True)
    text = (ROOT / "scripts" / "gpu_wheels.sh").read_text()
    names = re.search(r"PKGS=\((.*?)\)", text, re.S).group(1).split()
    pinned = {line.split("==")[0].lower().replace("_", "-")
              for line in (ROOT / "requirements" / "lock.txt").read_text().splitlines() if "==" in line}
    assert names and [n for n in names if n.lower().replace("_", "-") not in pinned] == []


def test_heartbeat_verdict_needs_nvml_and_more_utilisation_under_load(tmp_path):
    gpu_check = load_gpu_check()
    facts = tmp_path / "facts.jsonl"
    cases = [({"nvml": False, "gpus": 0, "gpu_util_idle_mean": None, "samples_idle": []}, 1),
             ({"nvml": True, "gpus": 1, "gpu_util_idle_mean": 0.0, "gpu_util_load_mean": 0.0}, 1),
             ({"nvml": True, "gpus": 1, "gpu_util_idle_mean": 0.0, "gpu_util_load_mean": 97.5}, 0)]
    for data, expected in cases:
        (tmp_path / "hb.json").write_text(json.dumps(data))
        assert gpu_check.heartbeat(str(tmp_path / "hb.json"), str(facts)) == expected
    recorded = [json.loads(line)["heartbeat"] for line in facts.read_text().splitlines()]
    assert len(recorded) == 3 and "samples_idle" not in recorded[0]  # the raw samples stay in heartbeat.json


def test_summary_holds_every_step_and_fact(tmp_path):
    gpu_check = load_gpu_check()
    (tmp_path / "steps.jsonl").write_text('{"step": "env", "rc": 0, "s": 3}\n{"step": "tests", "rc": 1, "s": 40}\n')
    (tmp_path / "facts.jsonl").write_text('{"env": {"cuda_available": true}}\n')
    gpu_check.summary(str(tmp_path / "steps.jsonl"), str(tmp_path / "facts.jsonl"), str(tmp_path / "s.json"), "1")
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["failed_steps"] == 1 and summary["seconds"] == 43 and summary["env"] == {"cuda_available": True}
    assert [s["step"] for s in summary["steps"]] == ["env", "tests"]
