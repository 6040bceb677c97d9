"""One episode summary, one set of metric definitions (issue 25 item 2): the env builds the EpisodeSummary once,
and the local trainer's path and the verl telemetry bridge's path turn the same episodes into the same metrics,
``loc/*`` included; ``reward/frac_zero_std`` and ``completions/clipped_ratio`` on hand-made groups."""

from __future__ import annotations

import pytest

from graph_planner.agents.rule_policy import RulePolicy
from graph_planner.codegraph import GraphCache
from graph_planner.config.loader import load_run_config
from graph_planner.config.schema import RunConfig, TelemetryConfig
from graph_planner.env.assembly import open_env
from graph_planner.env.episode import run_episode
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.env.samples import sample_task
from graph_planner.episode.summary import EpisodeSummary
from graph_planner.episode.turns import Trajectory
from graph_planner.telemetry.metrics import episode_metrics, reward_metrics
from graph_planner.training.verl.telemetry import EPISODES_FILE, VerlTelemetryBridge, record_episode

FOUND = "graphplanner-samples__textkit-7"  # the rule policy localises and the oracle resolves it
MISSED = "graphplanner-samples__invcalc-13"  # the rule policy commits other code: unresolved


def _config(tmp_path, **env) -> RunConfig:
    return RunConfig.model_validate({"backends": {"cgm_backend": "oracle"}, "env": {"max_steps": 8, **env},
                                     "paths": {"cache_dir": str(tmp_path)},
                                     "logging": {"output_dir": str(tmp_path / "runs")}})


def _episode(task_id: str, tmp_path) -> tuple[Trajectory, PlannerEnv]:
    task = sample_task(task_id)
    with open_env(task, _config(tmp_path), None, "test-summary", cache=GraphCache(tmp_path / "graphs")) as env:
        return run_episode(task, env, RulePolicy()), env


def test_local_and_verl_paths_give_identical_metrics_for_the_same_episodes(tmp_path):
    played = [_episode(FOUND, tmp_path), _episode(MISSED, tmp_path)]
    trajectories = [trajectory for trajectory, _ in played]
    assert trajectories[0].resolved and not trajectories[1].resolved
    # the env built the summary once; the trajectory carries that one, with the runner's policy name
    for trajectory, env in played:
        assert trajectory.summary == env.summary and trajectory.summary.policy == "rule"
        assert trajectory.reward == env.summary.episode_return

    # local path: what training/local/run.py logs per step (groups task by task, group_size 1 here)
    switches = TelemetryConfig()
    local = episode_metrics(trajectories, 30.0, switches, groups=[0, 1])
    # verl path: the agent loop records env.summary; the job's entry process logs them for the step
    config = load_run_config(None, {"logging.output_dir": str(tmp_path), "experiment.run_name": "r"})
    run_dir = tmp_path / "r"
    for i, (_, env) in enumerate(played):
        record_episode(run_dir / "verl" / EPISODES_FILE, 0, env.summary, 15.0, group=f"uid-{i}")
    bridge = VerlTelemetryBridge(config, run_dir)
    for row in bridge.episodes.read():
        bridge.pending.setdefault(row["step"], []).append(row)
    verl = bridge.step_metrics(1, {"timing_s/gen": 30.0})
    verl_episode_part = {k: v for k, v in verl.items() if not k.startswith("timing_s/")}

    assert verl_episode_part == local
    assert {"loc/m_recall", "loc/peak_m_recall", "loc/gold_read_rate", "loc/episodes"} <= verl.keys()
    assert verl["loc/episodes"] == 2.0 and verl["loc/m_recall"] == 0.5
    assert verl["reward/resolved_rate"] == 0.5 and verl["completions/clipped_ratio"] == 0.0
    # the local trainer's own reward/* are the same function's
    trainer_part = reward_metrics(trajectories, [0, 1])
    assert {k: local[k] for k in trainer_part} == trainer_part


def _summary(task: str, ret: float, steps: int = 2, clipped: int = 0) -> EpisodeSummary:
    return EpisodeSummary(task, episode_return=ret, steps=steps, clipped_responses=clipped)


def test_frac_zero_std_counts_groups_whose_returns_are_all_equal():
    episodes = [_summary("a", 1.0), _summary("a", 1.0),      # all equal: teaches nothing
                _summary("b", 0.0), _summary("b", 1.0),      # spread: learns
                _summary("c", -0.5), _summary("c", -0.5)]    # all equal
    m = reward_metrics(episodes)  # groups default to the task
    assert m["reward/frac_zero_std"] == pytest.approx(2 / 3)
    assert m["reward/std"] == pytest.approx(float(__import__("numpy").std([1, 1, 0, 1, -0.5, -0.5])))  # ddof 0
    # explicit groups (verl's uid): the same task twice in a batch is two groups
    assert reward_metrics(episodes, ["g1", "g1", "g2", "g2", "g3", "g4"])["reward/frac_zero_std"] == 0.75
    with pytest.raises(ValueError, match="3 group ids for 6 episodes"):
        reward_metrics(episodes, [1, 2, 3])


def test_clipped_ratio_is_the_share_of_turns_cut_at_the_length_limit():
    episodes = [_summary("a", 0.0, steps=4, clipped=1), _summary("b", 0.0, steps=6, clipped=3)]
    m = episode_metrics(episodes, 1.0, TelemetryConfig())
    assert m["completions/clipped_ratio"] == pytest.approx(4 / 10)
    assert episode_metrics([_summary("a", 0.0, steps=3)], 1.0, TelemetryConfig())["completions/clipped_ratio"] == 0


def test_summary_round_trips_and_names_a_bad_field():
    s = EpisodeSummary("t", resolved=True, verdict="resolved", episode_return=0.9, steps=3,
                       localisation={"m_recall": 1.0}, patch_stats={"generated": 1, "rejected": {}}, patch="diff")
    assert EpisodeSummary.from_dict(s.to_dict()) == s
    assert "patch" not in s.metrics_record() and "test_output" not in s.metrics_record()
    with pytest.raises(ValueError, match="steps must be an integer"):
        EpisodeSummary.from_dict({"task_id": "t", "steps": "many"})
    with pytest.raises(TypeError, match="patch_stats must be a mapping"):
        EpisodeSummary.from_dict({"task_id": "t", "patch_stats": [1]})
    with pytest.raises(ValueError, match="no task_id"):
        EpisodeSummary.from_dict({})


def test_cut_short_ends_the_episode_charged_like_the_env_limits(tmp_path):
    task = sample_task(FOUND)
    config = _config(tmp_path, step_penalty=0.01, timeout_penalty=0.2, failure_penalty=0.3)
    with open_env(task, config, None, "test-summary") as env:
        env.reset()
        step = env.step({"name": "note", "arguments": {"text": "looking"}}, response_clipped=True)
        assert not step.done and env.summary is None
        summary = env.cut_short("response_length")
    assert env.done and env.summary is summary and env.cut_short("again") is summary
    assert summary.termination_reason == "response_length" and not summary.resolved
    assert summary.episode_return == pytest.approx(-0.01 - 0.2 - 0.3)
    assert summary.steps == 1 and summary.clipped_responses == 1 and summary.localisation is not None
