"""Trajectory SFT warm start: examples are exactly the prompts the planner sees at RL time (checked against a real
ModelPolicy playing the same actions in a real sandbox), tokenised as rollouts tokenise them, filtered to resolved
episodes; `gp sft` fine-tunes the toy model with TRL's SFTTrainer and writes an HF dir `gp train` can start from."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graph_planner.agents.model_policy import ModelPolicy
from graph_planner.agents.rule_policy import RulePolicy
from graph_planner.cli import app
from graph_planner.codegraph import GraphCache
from graph_planner.config.schema import RunConfig
from graph_planner.env.episode import run_episode
from graph_planner.env.planner_env import PlannerEnv
from graph_planner.env.replay import trajectory_lines
from graph_planner.env.samples import LOCAL_DEBUG_CONFIG, sample_task
from graph_planner.models.chat import ChatResponse
from graph_planner.models.synthesizers import make_synthesizer
from graph_planner.models.toy import ensure_toy_checkpoint
from graph_planner.sandbox.factory import make_sandbox
from graph_planner.training.local.policy_handle import PolicyHandle
from graph_planner.training.sft.data import examples_from_rows, is_resolved, tokenize_example

RESOLVED = "graphplanner-samples__textkit-7"     # the rule policy + oracle resolves it
UNRESOLVED = "graphplanner-samples__invcalc-13"  # ... and not this one


def _config(tmp_path: Path, **sft) -> RunConfig:
    return RunConfig.model_validate({"backends": {"cgm_backend": "oracle"}, "env": {"max_steps": 8, "history_turns": 2},
                                     "paths": {"cache_dir": str(tmp_path / "cache")},
                                     "training": {"sft": sft, "max_prompt_length": 1024}})


def _play(task_id: str, config: RunConfig, policy, tmp_path: Path):
    task = sample_task(task_id)
    with make_sandbox(task, config, None, "test-sft") as sandbox:
        env = PlannerEnv(task, sandbox, config.env, make_synthesizer(config, task),
                         graph_cache=GraphCache(tmp_path / "graphs"))
        return run_episode(task, env, policy)


class ScriptedChat:
    """FAKE model (no LLM needed): answers each turn with the next text of a script; records nothing else."""

    supports_tools = False

    def __init__(self, texts: list[str]) -> None:
        self.texts = list(texts)

    def chat(self, messages, tools=None, sampling=None) -> ChatResponse:
        return ChatResponse(text=self.texts.pop(0))


@pytest.fixture(scope="module")
def rule_rows(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sft")
    config = _config(tmp)
    return {task_id: trajectory_lines(_play(task_id, config, RulePolicy(), tmp)) for task_id in (RESOLVED, UNRESOLVED)}


def test_examples_are_the_prompts_the_model_policy_sees(rule_rows, tmp_path):
    config = _config(tmp_path)
    rows = rule_rows[RESOLVED]
    examples = examples_from_rows(rows, config.env.history_turns, "rule")
    responses = [e.response for e in examples]
    assert [json.loads(r)["name"] for r in responses][-2:] == ["repair", "submit"]
    # a model policy that says exactly these texts in the same env sees exactly these prompts
    played = _play(RESOLVED, config, ModelPolicy(ScriptedChat(responses), None, config.env.history_turns), tmp_path)
    assert played.resolved and len(played.turns) == len(examples)
    for turn, example in zip(played.turns, examples):
        assert turn.prompt_messages == example.messages
        assert turn.response_text == example.response


def test_only_resolved_episodes_are_kept_and_invalid_turns_never(rule_rows):
    assert is_resolved(rule_rows[RESOLVED]) and not is_resolved(rule_rows[UNRESOLVED])
    rows = [dict(r) for r in rule_rows[RESOLVED]]
    rows[2] = {**rows[2], "parse_error": {"code": "invalid-json", "detail": "x"}}
    assert len(examples_from_rows(rows, 2, "rule")) == len(examples_from_rows(rule_rows[RESOLVED], 2, "rule")) - 1


def test_tokenised_like_rollouts(rule_rows, shared_model_cache):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = ensure_toy_checkpoint(shared_model_cache)
    tokenizer = AutoTokenizer.from_pretrained(path)
    handle = PolicyHandle(AutoModelForCausalLM.from_pretrained(path), tokenizer, 1024, 48)
    for example in examples_from_rows(rule_rows[RESOLVED], 2, "rule"):
        row = tokenize_example(example, tokenizer, 1024)
        prompt = handle.encode(example.messages)[-1024:]  # PolicyHandle.generate keeps the last max_prompt_length
        n = len(prompt)
        assert row["input_ids"][:n] == prompt and row["completion_mask"][:n] == [0] * n
        response = row["input_ids"][n:]
        assert response[-1] == tokenizer.eos_token_id and all(row["completion_mask"][n:])
        assert tokenizer.decode(response, skip_special_tokens=True) == example.response


def write_trajectories(rule_rows, trajectories: Path) -> Path:
    """The rule episodes as eval trajectory files (one JSONL per task), as `gp sft --source trajectories` reads."""
    for task_id, rows in rule_rows.items():
        path = trajectories / f"{task_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows), encoding="utf-8")
    return trajectories


def test_gp_sft_from_eval_trajectories_writes_a_trainable_model(rule_rows, tmp_path, shared_model_cache):
    from transformers import AutoModelForCausalLM

    trajectories = write_trajectories(rule_rows, tmp_path / "trajectories")
    out = tmp_path / "sft-out"
    result = CliRunner().invoke(app, [
        "sft", "-c", str(LOCAL_DEBUG_CONFIG), "--source", "trajectories", "--trajectories", str(trajectories),
        "--out", str(out), "--output-dir", str(tmp_path / "runs"), "--set", f"paths.cache_dir={shared_model_cache}",
        "--set", "training.sft.epochs=2", "--set", "training.sft.lr=1e-3", "--set", "training.max_prompt_length=256"])
    assert result.exit_code == 0, result.output
    assert re.search(r"^SFT epoch 2/2: loss [0-9.]+, token accuracy [0-9.]+$", result.output, re.M), result.output
    summary = json.loads(re.search(r'\{"model_dir".*\}', result.output).group(0))  # after progress bars
    assert summary["episodes"] == 2 and summary["episodes_kept"] == 1 and summary["examples"] >= 5
    assert summary["model_dir"] == str(out / "model")
    model = AutoModelForCausalLM.from_pretrained(out / "model")
    base = AutoModelForCausalLM.from_pretrained(ensure_toy_checkpoint(shared_model_cache))
    changed = [n for (n, p), (_, q) in zip(model.named_parameters(), base.named_parameters()) if not p.equal(q)]
    assert changed, "SFT did not update the weights"
    recorded = json.loads((out / "sft.json").read_text())
    assert recorded["source"] == "trajectories" and recorded["examples"] == summary["examples"]


def test_trajectories_source_without_files_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["sft", "--source", "trajectories", "--trajectories", str(tmp_path / "none"),
                                      "--output-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2 and "no trajectory *.jsonl files" in result.output



def test_sft_with_an_attention_window_trains_the_windowed_model_verl_will_run(rule_rows, tmp_path, shared_model_cache):
    """With ``training.attention_window`` the verl job runs the planner with sliding-window attention; the SFT warm
    start trains that same architecture (a Llama toy becomes the same-weight Mistral with ``sliding_window``), so
    the SFT model acts in verl as it acted in SFT."""
    trajectories = write_trajectories(rule_rows, tmp_path / "trajectories")
    out = tmp_path / "sft-out"
    result = CliRunner().invoke(app, [
        "sft", "-c", str(LOCAL_DEBUG_CONFIG), "--source", "trajectories", "--trajectories", str(trajectories),
        "--out", str(out), "--output-dir", str(tmp_path / "runs"), "--set", f"paths.cache_dir={shared_model_cache}",
        "--set", "training.sft.epochs=1", "--set", "training.max_prompt_length=256",
        "--set", "training.attention_window=16"])
    assert result.exit_code == 0, result.output
    config = json.loads((out / "model" / "config.json").read_text())
    assert config["model_type"] == "mistral" and config["sliding_window"] == 16, config
    assert (ensure_toy_checkpoint(shared_model_cache) / "config.json").is_file()  # the shared base is untouched
    assert json.loads((ensure_toy_checkpoint(shared_model_cache) / "config.json").read_text())["model_type"] == "llama"
