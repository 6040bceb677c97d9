"""The localisation-gated oracle synthesiser and the localisation metrics, on real bundled tasks in real local
sandboxes: the oracle hands out the gold patch only when memory M holds the code it changes, and every episode
records how much of that code the planner found (M / W recall and precision, the step of the first gold read)."""

from __future__ import annotations

import pytest

from graph_planner.agents.rule_policy import RulePolicy
from graph_planner.codegraph import GraphCache
from graph_planner.config.loader import ConfigError, load_run_config
from graph_planner.config.schema import RunConfig
from graph_planner.env.episode import run_episode
from graph_planner.env.localisation import gold_nodes, recall_precision
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.env.samples import sample_task
from graph_planner.episode.gold_sites import gold_sites
from graph_planner.episode.patch import RepairRequest
from graph_planner.episode.turns import Trajectory
from graph_planner.models.oracle import OracleSynthesizer
from graph_planner.models.synthesizers import NoSynthesizer, make_synthesizer
from graph_planner.sandbox.factory import make_sandbox
from graph_planner.telemetry.metrics import episode_metrics

FOUND = "graphplanner-samples__textkit-7"  # the rule policy commits truncate(), the function the gold patch changes
MISSED = "graphplanner-samples__invcalc-13"  # the rule policy commits other code than Inventory.__init__

DIFF = """diff --git a/pkg/mod.py b/pkg/mod.py
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -3,3 +3,4 @@ def f():
     a = 1
--- b = 2
+    b = 3
+    c = 4
     return a
@@ -20,0 +22,1 @@
+import os
"""


def test_gold_sites_are_old_side_changed_lines():
    # the removed line starting with "--" is a change, not a header; an addition after line 20 anchors at 20
    assert gold_sites(DIFF) == {"pkg/mod.py": [4, 20]}
    assert gold_sites("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x = 1\n") == {}


def _request(task_id: str, snippets: list[dict]) -> RepairRequest:
    return RepairRequest(task_id=task_id, issue="", plan="fix", snippets=snippets)


def test_oracle_withholds_the_gold_patch_until_memory_holds_its_code():
    task = sample_task(FOUND)
    oracle = OracleSynthesizer(task)
    (path, lines), = gold_sites(task.gold_patch).items()
    miss = oracle.synthesize(_request(task.task_id, [{"path": path, "start_line": 1, "end_line": lines[0] - 1}]))
    assert not miss.has_patch and miss.error.startswith("oracle-withheld") and miss.diagnostic == "oracle"
    assert f"{path} lines {lines[0]}" in miss.error
    hit = oracle.synthesize(_request(task.task_id, [{"path": path, "start_line": lines[0] - 2,
                                                      "end_line": lines[-1] + 1}]))
    assert hit.diff == task.gold_patch and hit.diagnostic == "oracle"


def _episode(task_id: str, tmp_path, **env) -> Trajectory:
    task = sample_task(task_id)
    config = RunConfig.model_validate({"backends": {"cgm_backend": "oracle"}, "env": {"max_steps": 8, **env},
                                       "paths": {"cache_dir": str(tmp_path)}})
    with make_sandbox(task, config, None, "test-loc") as sandbox:
        env_ = PlannerEnv(task, sandbox, config.env, synthesizer=make_synthesizer(config, task),
                          graph_cache=GraphCache(tmp_path / "graphs"))
        return run_episode(task, env_, RulePolicy())


def test_rule_policy_with_oracle_resolves_only_what_it_localised(tmp_path):
    found = _episode(FOUND, tmp_path)
    assert found.resolved and found.info["diagnostic"] == "oracle"
    loc = found.info["localisation"]
    assert loc["gold_nodes"] == ["fn:textkit/wrap.py::truncate"]
    assert loc["m_recall"] == 1.0 and loc["w_recall"] == 1.0 and 0 < loc["w_precision"] < 1
    read_steps = [i + 1 for i, t in enumerate(found.turns) if t.action and t.action["name"] == "read"]
    assert loc["first_gold_read_step"] == read_steps[0]

    missed = _episode(MISSED, tmp_path)
    assert not missed.resolved
    repair = next(t.info["repair"] for t in missed.turns if t.info.get("repair"))
    assert repair["status"] == "no_patch" and repair["reason"].startswith("oracle-withheld")
    assert missed.info["localisation"]["m_recall"] == 0.0 and missed.info["localisation"]["peak_m_recall"] == 0.0

    metrics = episode_metrics([found, missed], 1.0, RunConfig().telemetry)
    assert metrics["loc/m_recall"] == 0.5 and metrics["loc/episodes"] == 2.0
    assert metrics["loc/gold_read_rate"] == pytest.approx(
        sum(t.info["localisation"]["first_gold_read_step"] is not None for t in (found, missed)) / 2)


def test_localisation_reward_adds_the_peak_memory_recall_once(tmp_path):
    plain = _episode(FOUND, tmp_path)
    shaped = _episode(FOUND, tmp_path, localisation_reward=0.5)
    assert shaped.reward == pytest.approx(plain.reward + 0.5)
    assert shaped.turns[-1].reward == pytest.approx(plain.turns[-1].reward + 0.5)


def test_localisation_reward_must_be_non_negative():
    with pytest.raises(ConfigError, match="env.localisation_reward"):
        load_run_config(None, {"env.localisation_reward": -0.1})


def test_recall_and_precision_count_containing_nodes(tmp_path):
    task = sample_task(FOUND)
    config = RunConfig.model_validate({"paths": {"cache_dir": str(tmp_path)}})
    with make_sandbox(task, config, None, "test-loc") as sandbox:
        env = PlannerEnv(task, sandbox, config.env, NoSynthesizer(), graph_cache=GraphCache(tmp_path / "graphs"))
        env.reset()
        graph = env.graph
    gold = gold_nodes(graph, task.gold_patch)
    assert recall_precision(graph, gold, ["file:textkit/wrap.py"]) == (1.0, 1.0)  # the file holds the function
    other = next(n for n in graph.nodes if n.startswith("fn:") and n not in gold and "wrap.py" not in n)
    assert recall_precision(graph, gold, [other, gold[0]]) == (1.0, 0.5)
    assert recall_precision(graph, gold, []) == (0.0, 0.0)
