"""Run one episode: policy <-> env until done, recorded as a Trajectory of Turns (with token ids / log-probs when
the policy's model provides them, for training)."""

from __future__ import annotations

from typing import Any

from graph_planner.agents import Policy
from graph_planner.data.record import TaskRecord
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.episode.actions import action_to_dict
from graph_planner.episode.turns import Trajectory, Turn


def _raw_text(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        return str(raw.get("content") or "")
    return str(raw)


def run_episode(task: TaskRecord, env: PlannerEnv, policy: Policy) -> Trajectory:
    """Reset the env, let ``policy`` act until the env says done (the env owns the step budget)."""
    policy.reset()
    obs_text, obs = env.reset()
    trajectory = Trajectory(task_id=task.task_id)
    initial_observation = obs_text
    planner_tokens = {"prompt": 0, "completion": 0}
    while True:
        decision = policy.act(obs_text, obs, trajectory.turns)
        if decision.action is not None:
            result = env.step(decision.action, parse_error=decision.parse_error, used_fallback=decision.used_fallback,
                              response_clipped=decision.finish_reason == "length")
        else:
            result = env.step(decision.raw_output, response_clipped=decision.finish_reason == "length")
            result.info["raw_output"] = decision.raw_output  # replay re-parses exactly what the model said
        planner_tokens["prompt"] += decision.prompt_tokens
        planner_tokens["completion"] += decision.completion_tokens
        trajectory.turns.append(Turn(
            prompt_messages=decision.messages,
            response_text=decision.response_text or _raw_text(decision.raw_output),
            action=action_to_dict(decision.action) if decision.action is not None else None,
            observation=result.observation,
            reward=result.reward,
            parse_error=result.info.get("parse_error"),
            used_fallback=decision.used_fallback,
            prompt_token_ids=decision.prompt_token_ids,
            response_token_ids=decision.response_token_ids,
            response_logprobs=decision.response_logprobs,
            info=result.info,
        ))
        obs_text, obs = result.observation, result.obs
        if result.done:
            break
    summary = env.summary
    assert summary is not None, "the env ended the episode, so it built the summary"
    summary.tokens = {**summary.tokens, "planner_prompt": planner_tokens["prompt"],
                      "planner_completion": planner_tokens["completion"]}
    summary.policy = policy.name
    trajectory.reward = summary.episode_return
    trajectory.resolved = summary.resolved
    trajectory.termination_reason = summary.termination_reason
    trajectory.patch = summary.patch
    trajectory.info = {**summary.to_dict(), "initial_observation": initial_observation}
    return trajectory
