"""PlannerEnv on a bundled sample task with the real LocalSandbox and the real code graph: observations show node
ids, memories and caps, rewards and termination, and the repair cycle's keep / roll back / reject decisions."""

from __future__ import annotations

import pytest
from sample_env_fixtures import TARGET, graph_cache, make_env, sandbox, task  # noqa: F401 - pytest fixtures

from graph_planner.episode.actions import (
    ExploreExpand,
    ExploreFind,
    MemoryCommit,
    MemoryDelete,
    Read,
    Repair,
    RunTests,
    Submit,
)
from graph_planner.episode.patch import FileEdit, PatchProposal, RepairRequest
from graph_planner.models.synthesizers import GoldSynthesizer, NoSynthesizer


class ScriptedSynthesizer:
    """Stands in for a synthesiser MODEL (none can run here): returns the given proposals in order and keeps
    the requests it received."""

    name = "scripted"

    def __init__(self, proposals: list[PatchProposal]) -> None:
        self.proposals = list(proposals)
        self.requests: list[RepairRequest] = []

    def synthesize(self, request: RepairRequest) -> PatchProposal:
        self.requests.append(request)
        return self.proposals.pop(0)


def test_reset_shows_the_issue_and_a_map_of_real_node_ids(make_env, task):  # noqa: F811
    env = make_env()
    text, obs = env.reset()
    assert task.title in text and "truncate(\"Hello brave new world\", 10)" in text
    assert "file:textkit/wrap.py" in text and "pkg:textkit" in text
    assert obs["outline"] and all(n["id"] in env.graph.nodes for n in obs["outline"])
    assert obs["steps_left"] == env.max_steps and obs["memory"]["nodes"] == []


def test_find_expand_read_show_ids_and_real_code(make_env, sandbox):  # noqa: F811
    env = make_env()
    env.reset()
    found = env.step(ExploreFind(query="truncate"))
    assert TARGET in found.observation and found.obs["result"]["nodes"][0]["id"] == TARGET
    expanded = env.step(ExploreExpand(node_id=TARGET, hop=1))
    neighbours = expanded.obs["result"]["nodes"]
    assert neighbours and all(n["id"] in expanded.observation for n in neighbours)
    assert "file:textkit/wrap.py" in {n["id"] for n in neighbours}
    read = env.step(Read(node_id=TARGET)).obs["result"]
    file_lines = sandbox.read_file("textkit/wrap.py").splitlines()
    assert file_lines[read["start_line"] - 1].startswith("def truncate(")
    assert f"{read['start_line']} | def truncate(" in read["code"]
    assert env.memory.working.keys() >= {TARGET, "file:textkit/wrap.py"}


def test_unknown_node_id_is_an_error_with_suggestions_not_a_format_error(make_env):  # noqa: F811
    env = make_env(step_penalty=0.01, format_penalty=0.5)
    env.reset()
    result = env.step(Read(node_id="fn:textkit/wrap.py::truncat"))
    assert "unknown node id" in result.observation and TARGET in result.observation
    assert result.reward == pytest.approx(-0.01)
    assert result.info["parse_error"] is None and env.stats.invalid_nodes == 1


def test_memory_commit_hydrates_code_and_respects_caps(make_env):  # noqa: F811
    env = make_env(memory_max_nodes=2, working_max_nodes=8)
    env.reset()
    assert len(env.memory.working) <= 8
    out = env.step(MemoryCommit(node_ids=[TARGET, "fn:textkit/wrap.py::wrap", "file:textkit/slug.py", "fn:nope"],
                                note="truncate is too long"))
    result = out.obs["result"]
    assert result["added"] == [TARGET, "fn:textkit/wrap.py::wrap"]
    assert "memory is full" in result["rejected"]["file:textkit/slug.py"]
    assert "unknown node id" in result["rejected"]["fn:nope"]
    entry = env.memory.entries[TARGET]
    assert "return text[:length].rstrip() + ellipsis" in entry.code and entry.note == "truncate is too long"
    assert f"Memory M: 2/2 node(s) [{TARGET}, fn:textkit/wrap.py::wrap]" in out.observation
    env.step(ExploreFind(query="path:textkit", limit=50))
    assert len(env.memory.working) <= 8 and TARGET in env.memory.working  # M's nodes are never evicted from W
    deleted = env.step(MemoryDelete(node_ids=["fn:textkit/wrap.py::wrap", "fn:other"])).obs["result"]
    assert deleted == {"removed": ["fn:textkit/wrap.py::wrap"], "missing": ["fn:other"]}


def test_repair_is_refused_with_empty_memory_or_when_synthesis_is_disabled(make_env, task):  # noqa: F811
    env = make_env(synthesizer=GoldSynthesizer(task))
    env.reset()
    refused = env.step(Repair(plan="fix it"))
    assert refused.obs["result"]["status"] == "refused" and "memory M is empty" in refused.observation
    env = make_env(synthesizer=GoldSynthesizer(task), disable_cgm_synthesis=True)
    env.reset()
    env.step(MemoryCommit(node_ids=[TARGET]))
    refused = env.step(Repair(plan="fix it"))
    assert "synthesis disabled" in refused.observation
    assert env.stats.generated == 0 and env.sandbox.diff() == ""


def test_rewards_penalties_and_max_steps_termination(make_env):  # noqa: F811
    env = make_env(step_penalty=0.01, format_penalty=0.1, failure_penalty=0.5, timeout_penalty=0.2)
    env.max_steps = 2
    env.reset()
    bad = env.step("Let me think about this first.")
    assert bad.info["parse_error"] == "no-action" and bad.info["action"] is None
    assert "invalid action (no-action)" in bad.observation
    assert bad.reward == pytest.approx(-0.11) and not bad.done
    last = env.step('{"name": "note", "arguments": {"text": "ellipsis length ignored"}}')
    assert last.done and last.reward == pytest.approx(-0.01 - 0.2 - 0.5)
    episode = last.info["episode"]
    assert episode["termination_reason"] == "max_steps" and not episode["resolved"]
    assert episode["parse_errors"] == 1 and episode["parse_error_codes"] == {"no-action": 1}
    assert episode["invalid_actions"] == 1
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(Submit())


def test_clamped_arguments_are_reported_in_step_info(make_env):  # noqa: F811
    env = make_env()
    env.reset()
    result = env.step(f'{{"name": "explore_expand", "arguments": {{"node_id": "{TARGET}", "hop": 7}}}}')
    assert result.info["action"]["arguments"]["hop"] == 3
    assert any("hop=7 clamped to 3" in w for w in result.info["warnings"])
    assert "warning: explore_expand.hop=7 clamped to 3" in result.observation


def test_run_tests_shows_symptoms_not_test_source_and_op_limit_ends_episode(make_env):  # noqa: F811
    env = make_env(repo_op_limit=1, failure_penalty=0.5, timeout_penalty=0.25)
    env.reset()
    result = env.step(RunTests())
    assert "0/3 of the failing tests pass" in result.observation
    # the failing tests are hidden (new file of the test_patch): counted, never named, no assertion text
    assert "3 hidden test(s) not passing yet" in result.observation
    assert "test_issue_7" not in result.observation and "test_truncate_result_fits_length" not in result.observation
    assert "def test_" not in result.observation and "assert" not in result.observation
    assert result.done and result.info["episode"]["termination_reason"] == "repo_op_limit"
    assert result.reward == pytest.approx(-0.75)
    assert result.info["episode"]["tests_run"] == 1


def test_repair_cycle_keeps_rolls_back_and_rejects_scripted_synthesizer_model(make_env, task, sandbox):  # noqa: F811
    bad_syntax = [FileEdit("textkit/wrap.py", 50, 50, "    return text[:length - len(ellipsis)].rstrip( + ellipsis\n")]
    no_gain = [FileEdit("textkit/wrap.py", 50, 50, "    return text[:length].rstrip() + ellipsis  # same\n")]
    test_edit = ("--- a/tests/test_issue_7.py\n+++ b/tests/test_issue_7.py\n@@ -0,0 +1 @@\n+x = 1\n")
    escape = "--- a/../outside.py\n+++ b/../outside.py\n@@ -1 +1 @@\n-a\n+b\n"
    synth = ScriptedSynthesizer([
        PatchProposal(edits=[FileEdit("textkit/wrap.py", 400, 401, "x\n")]),
        PatchProposal(diff=test_edit),
        PatchProposal(diff=escape),
        PatchProposal(edits=bad_syntax),
        PatchProposal(edits=no_gain),
        PatchProposal(diff=task.gold_patch),
    ])
    env = make_env(synthesizer=synth, max_steps=20, success_reward=2.0, reward_scale=1.5)
    env.reset()
    env.step(MemoryCommit(node_ids=[TARGET], note="off by len(ellipsis)"))
    statuses = []
    for _ in range(5):
        result = env.step(Repair(plan="cut the ellipsis length from the slice", target_node_ids=[TARGET]))
        statuses.append((result.obs["result"]["status"], result.obs["result"]["reason"].split(":")[0]))
        assert sandbox.diff() == "", "a rejected or rolled back patch must leave the tree unchanged"
    assert statuses == [("rejected", "malformed"), ("rejected", "touches-tests"), ("rejected", "guard"),
                        ("rolled_back", "syntax-error"), ("rolled_back", "tests-not-improved")]
    request = synth.requests[0]
    assert request.target_node_ids == [TARGET] and request.snippets[0]["node_id"] == TARGET
    assert "return text[:length].rstrip() + ellipsis" in request.snippets[0]["code"]
    assert any(n["id"] == TARGET for n in request.graph["nodes"]) and "off by len(ellipsis)" in request.notes[0]
    kept = env.step(Repair(plan="cut the ellipsis length from the slice", target_node_ids=[TARGET]))
    assert kept.obs["result"]["status"] == "kept" and "KEPT" in kept.observation
    assert "text[:length - len(ellipsis)]" in sandbox.diff()
    assert "len(ellipsis)" in env.memory.entries[TARGET].code  # M re-hydrated from the updated graph
    reread = env.step(Read(node_id=TARGET)).obs["result"]["code"]
    assert "text[:length - len(ellipsis)]" in reread  # the graph was updated incrementally
    final = env.step(Submit())
    assert final.done and final.reward == pytest.approx(3.0)
    episode = final.info["episode"]
    assert episode["resolved"] and episode["termination_reason"] == "submitted"
    assert episode["patch_stats"] == {
        "generated": 6, "applied": 3, "kept": 1, "rolled_back": 2, "no_patch": {},
        "rejected": {"malformed": 1, "touches-tests": 1, "guard": 1, "syntax-error": 1, "tests-not-improved": 1}}
    assert "text[:length - len(ellipsis)]" in episode["patch"]
    assert [r["kind"] for r in env.test_runs] == ["repair", "repair", "grading"]


def test_no_synthesizer_counts_no_patch_and_env_reset_restores_the_base_tree(make_env, task, sandbox):  # noqa: F811
    env = make_env(synthesizer=NoSynthesizer("planner-only run"), max_steps=5)
    env.reset()
    env.step(MemoryCommit(node_ids=[TARGET]))
    result = env.step(Repair(plan="fix"))
    assert result.obs["result"]["status"] == "no_patch"
    assert "NO PATCH - synthesis-disabled: planner-only run" in result.observation
    assert env.stats.no_patch == {"synthesis-disabled": 1} and env.stats.generated == 0
    sandbox.apply_patch(task.gold_patch)  # an earlier episode's edit ...
    env.reset()
    assert sandbox.diff() == ""  # ... is gone at the next reset


def test_submit_of_an_unchanged_tree_is_unresolved_without_a_test_run(make_env, task, sandbox):  # noqa: F811
    """An empty final diff is the base tree, whose failing tests fail by definition: graded unresolved at once
    (as the SWE-bench harness grades an empty patch), so a rollout does not pay a fresh sandbox and a test run
    for it; any change at all is still graded by running the tests."""
    from graph_planner.env.planner_env import EMPTY_PATCH

    env = make_env(max_steps=5)
    env.reset()
    result = env.step(Submit())
    assert result.done and not result.info["episode"]["resolved"]
    assert result.info["grading"]["error"] == EMPTY_PATCH and env.test_runs == [] and env.stats.tests_run == 0
    env.reset()
    sandbox.apply_patch(task.gold_patch)
    result = env.step(Submit())
    assert result.info["episode"]["resolved"] and [run["kind"] for run in env.test_runs] == ["grading"]
