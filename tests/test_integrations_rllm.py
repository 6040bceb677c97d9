"""Contract tests of the rLLM adapters against rLLM 0.2.x's documented interface (BaseAgent / BaseEnv method
signatures, Step / Trajectory / Action shapes, the env/agent name mappings). rLLM is not on PyPI, so it is not
installed here: episodes are driven by a copy of its documented per-trajectory loop with scripted model replies
(no model server here), and registration is checked against a FAKE ``rllm`` module injected into sys.modules."""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import types
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from graph_planner.config.loader import dump_config_yaml
from graph_planner.config.schema import DataConfig, RunConfig
from graph_planner.data.prepare import prepare_datasets
from graph_planner.data.registry import register_dataset
from graph_planner.env import assembly
from graph_planner.integrations.episode_setup import RowError
from graph_planner.integrations.rllm import (
    RLLM_AVAILABLE,
    RLLM_NAME,
    GraphPlannerRLLMAgent,
    GraphPlannerRLLMEnv,
    compat,
    register_with_rllm,
)

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "sample"
TASK_ID = "graphplanner-samples__textkit-7"
TARGET = "fn:textkit/wrap.py::truncate"
SCRIPT = [
    json.dumps({"name": "memory_commit", "arguments": {"node_ids": [TARGET], "note": "slice ignores ellipsis"}}),
    json.dumps({"name": "repair", "arguments": {"plan": "subtract len(ellipsis)", "target_node_ids": [TARGET]}}),
    json.dumps({"name": "submit", "arguments": {}}),
]
pytestmark = pytest.mark.skipif(not (SAMPLE / "swebench" / "test.jsonl").is_file(), reason="no bundled samples")


def param_names(fn: Any) -> list[str]:
    out = []
    for p in inspect.signature(fn).parameters.values():
        out.append({p.VAR_KEYWORD: f"**{p.name}", p.VAR_POSITIONAL: f"*{p.name}"}.get(p.kind, p.name))
    return out


@pytest.fixture(scope="module")
def rllm_row(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """Sample tasks prepared and registered in rLLM's ``<split>_verl.parquet`` layout; (prepared dir, extra_info
    of TASK_ID's row: what rLLM's trainer hands ``from_dict``)."""
    out = tmp_path_factory.mktemp("prepared")
    prepare_datasets(DataConfig(output_dir=str(out), r2e_dataset=str(SAMPLE / "r2e"),
                                swebench_dataset=str(SAMPLE / "swebench"), repos_dir=str(SAMPLE / "repos")))
    result = register_dataset(out / "swebench" / "test.jsonl", "graph_planner", out / "registered", "train",
                              rllm_layout=True)
    rows = pq.read_table(result.rllm_path).to_pylist()
    return out, next(r["extra_info"] for r in rows if r["extra_info"]["task_id"] == TASK_ID)


@pytest.fixture
def sandboxes(monkeypatch) -> list[Any]:
    """Every sandbox the env builds (real LocalSandboxes), to check they are closed."""
    made: list[Any] = []
    real = assembly.make_sandbox

    def recording(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(assembly, "make_sandbox", recording)
    return made


def env_args(tmp_path: Path, prepared_dir: Path, synthesizer: str, **env: Any) -> dict[str, Any]:
    config = RunConfig.model_validate({
        "backends": {"cgm_backend": synthesizer}, "data": {"output_dir": str(prepared_dir)}, "env": env,
        "paths": {"cache_dir": str(tmp_path / "cache")}, "logging": {"output_dir": str(tmp_path / "runs")}})
    path = tmp_path / "run_config.yaml"
    path.write_text(dump_config_yaml(config), encoding="utf-8")
    return {"run_config_path": str(path)}


def run_like_agent_execution_engine(row: dict[str, Any], args: dict[str, Any], replies: list[str]):
    """rLLM 0.2.x AgentExecutionEngine's per-trajectory loop as documented: from_dict(row + env_args), reset env
    then agent, update_from_env(obs, 0, False, info); per step chat_completions -> model reply ->
    update_from_model -> env.step(action.action) -> update_from_env; env.close(). Replies are scripted."""
    env = GraphPlannerRLLMEnv.from_dict({**row, **args})
    agent = GraphPlannerRLLMAgent()
    obs, info = env.reset()
    agent.reset()
    agent.update_from_env(obs, 0.0, False, {**info, "max_steps": 10})
    prompts = []
    for reply in replies:
        prompts.append([dict(m) for m in agent.chat_completions])
        action = agent.update_from_model(reply)
        obs, reward, done, info = env.step(action.action)
        agent.update_from_env(obs, reward, done, info)
        if done:
            break
    env.close()
    return agent.trajectory, prompts


def test_contract_base_agent_methods_match_rllm_0_2():
    assert issubclass(GraphPlannerRLLMAgent, compat.BaseAgent)
    assert param_names(GraphPlannerRLLMAgent.reset) == ["self"]
    assert param_names(GraphPlannerRLLMAgent.update_from_env) == ["self", "observation", "reward", "done", "info",
                                                                  "**kwargs"]
    assert param_names(GraphPlannerRLLMAgent.update_from_model) == ["self", "response", "**kwargs"]
    for prop in ("chat_completions", "trajectory"):
        assert isinstance(inspect.getattr_static(GraphPlannerRLLMAgent, prop), property)
    agent = GraphPlannerRLLMAgent()
    assert agent.get_current_state() is None and agent.trajectory.steps == []
    assert [m["role"] for m in agent.chat_completions] == ["system"] and "explore_find" in agent.chat_completions[0][
        "content"]


def test_contract_base_env_methods_match_rllm_0_2():
    assert issubclass(GraphPlannerRLLMEnv, compat.BaseEnv)
    assert param_names(GraphPlannerRLLMEnv.reset) == ["self"]
    assert param_names(GraphPlannerRLLMEnv.step) == ["self", "action"]
    assert param_names(GraphPlannerRLLMEnv.close) == ["self"]
    assert isinstance(inspect.getattr_static(GraphPlannerRLLMEnv, "from_dict"), staticmethod)
    assert param_names(GraphPlannerRLLMEnv.from_dict) == ["info"]
    assert isinstance(inspect.getattr_static(GraphPlannerRLLMEnv, "is_multithread_safe"), staticmethod)
    assert GraphPlannerRLLMEnv.is_multithread_safe() is True
    # rLLM's BaseEnv has no seed(); seed 002 lists one, so the env offers it as an extra rLLM never calls
    assert not hasattr(compat.BaseEnv, "seed")  # not part of the rLLM 0.2 contract (nor of our stand-in)
    assert param_names(GraphPlannerRLLMEnv.seed) == ["self", "seed"]
    assert not hasattr(GraphPlannerRLLMEnv, "compute_final_reward")  # it would overwrite the last step's reward


@pytest.mark.skipif(RLLM_AVAILABLE, reason="rLLM installed: its own classes are used, not the stand-ins")
def test_contract_local_stand_ins_have_the_documented_0_2_shapes():
    def fields(cls: type) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    assert fields(compat.Action) == ["action"]
    assert fields(compat.Step) == ["prompt_ids", "response_ids", "logprobs", "chat_completions", "observation",
                                   "thought", "action", "model_response", "model_output", "info", "reward", "done",
                                   "mc_return"]
    assert fields(compat.Trajectory) == ["uid", "name", "task", "steps", "reward", "info"]
    step = compat.Step(observation="o", action={"name": "submit"}, reward=1.0, done=True)
    assert compat.Step.from_dict(step.to_dict()) == step
    assert compat.Trajectory().reward == 0.0 and compat.Trajectory().name == "agent"


def test_contract_full_episode_resolves_with_the_gold_synthesizer(tmp_path, rllm_row, sandboxes):
    prepared_dir, row = rllm_row
    trajectory, prompts = run_like_agent_execution_engine(row, env_args(tmp_path, prepared_dir, "gold"), SCRIPT)
    assert trajectory.reward == pytest.approx(1.0)
    assert [s.model_response for s in trajectory.steps] == SCRIPT
    assert [s.action["name"] for s in trajectory.steps] == ["memory_commit", "repair", "submit"]
    assert [s.done for s in trajectory.steps] == [False, False, True]
    last = trajectory.steps[-1]
    assert last.info["episode"]["resolved"] and last.info["episode"]["termination_reason"] == "submitted"
    # the env's one episode summary: rLLM's summed step rewards equal its episode return
    from graph_planner.episode.summary import EpisodeSummary

    assert EpisodeSummary.from_dict(last.info["episode"]).episode_return == pytest.approx(trajectory.reward)
    assert TASK_ID in prompts[0][1]["content"] and TARGET.split("::")[0].replace("fn:", "file:") in prompts[0][1][
        "content"]
    assert trajectory.is_cumulative()
    assert len(sandboxes) == 1 and sandboxes[0]._root is None  # closed


def test_contract_full_episode_without_a_synthesizer_does_not_resolve(tmp_path, rllm_row, sandboxes):
    prepared_dir, row = rllm_row
    replies = ["Let me look around first.", *SCRIPT]
    trajectory, _ = run_like_agent_execution_engine(row, env_args(tmp_path, prepared_dir, "none",
                                                                  format_penalty=0.05), replies)
    assert trajectory.reward == pytest.approx(-0.05)
    assert trajectory.steps[0].action is None and trajectory.steps[0].info["parse_error"] == "no-action"
    assert not trajectory.steps[-1].info["episode"]["resolved"]
    assert all(box._root is None for box in sandboxes)


def test_contract_from_dict_takes_json_rows_and_names_what_is_missing(tmp_path, rllm_row):
    prepared_dir, row = rllm_row
    args = env_args(tmp_path, prepared_dir, "none")
    env = GraphPlannerRLLMEnv.from_dict(json.dumps({**row, **args}))
    assert env.task.task_id == TASK_ID and env.dataset_dir == prepared_dir / "swebench"
    with pytest.raises(RowError, match="run_config_path"):
        GraphPlannerRLLMEnv.from_dict(row)
    with pytest.raises(RowError, match="no 'task' key"):
        GraphPlannerRLLMEnv.from_dict({"task_id": TASK_ID, **args})
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(SCRIPT[0])


@pytest.mark.skipif(RLLM_AVAILABLE, reason="rLLM is installed here")
def test_contract_register_without_rllm_raises_the_install_instructions(monkeypatch):
    monkeypatch.setitem(sys.modules, "rllm", None)  # make sure no rllm can be imported
    with pytest.raises(ImportError, match="rLLM is not on PyPI: pip install -e from its git checkout") as info:
        register_with_rllm()
    assert "0.2" in str(info.value)


def _fake_rllm(monkeypatch, **tables: dict[str, Any]) -> types.ModuleType:
    """A FAKE rllm package exposing only rllm.trainer.env_agent_mappings with the given dicts."""
    root, trainer, mappings = (types.ModuleType(n) for n in ("rllm", "rllm.trainer", MAPPINGS))
    root.__path__, trainer.__path__ = [], []  # packages
    for name, table in tables.items():
        setattr(mappings, name, table)
    for module in (root, trainer, mappings):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    return mappings


MAPPINGS = "rllm.trainer.env_agent_mappings"


def test_contract_register_inserts_graph_planner_into_fake_rllm_mappings(monkeypatch):
    swe_env, swe_agent = type("SWEEnv", (), {}), type("SWEAgent", (), {})
    mappings = _fake_rllm(monkeypatch, ENV_CLASSES={"swe": swe_env}, AGENT_CLASSES={"sweagent": swe_agent},
                          ENV_CLASS_MAPPING={"swe": swe_env}, AGENT_CLASS_MAPPING={"sweagent": swe_agent})
    updated = register_with_rllm()
    assert sorted(updated) == ["AGENT_CLASSES", "AGENT_CLASS_MAPPING", "ENV_CLASSES", "ENV_CLASS_MAPPING"]
    assert mappings.ENV_CLASS_MAPPING == {"swe": swe_env, RLLM_NAME: GraphPlannerRLLMEnv}
    assert mappings.AGENT_CLASS_MAPPING == {"sweagent": swe_agent, RLLM_NAME: GraphPlannerRLLMAgent}
    assert mappings.ENV_CLASSES[RLLM_NAME] is GraphPlannerRLLMEnv
    assert mappings.AGENT_CLASSES[RLLM_NAME] is GraphPlannerRLLMAgent


def test_contract_register_refuses_a_fake_rllm_without_0_2_mappings(monkeypatch):
    _fake_rllm(monkeypatch, WORKFLOW_CLASS_MAPPING={})
    with pytest.raises(ImportError, match="not 0.2.x"):
        register_with_rllm()


def test_seed_002_env_args_ds_json_and_seed(tmp_path):
    """Seed 002: env.env_args.ds_json names an R2E-Gym row; BaseEnv.seed is accepted (rLLM itself has none)."""
    ds = tmp_path / "r2e_ds.json"
    ds.write_text((SAMPLE / "r2e" / "train.jsonl").read_text().splitlines()[0])
    env = GraphPlannerRLLMEnv.from_dict({"ds_json": str(ds), "max_steps": 5,
                                         **env_args(tmp_path, tmp_path / "prep", "none")})
    row = json.loads(ds.read_text())
    assert env.task.backend == "r2egym" and env.task.image == row["docker_image"]
    assert env.task.max_steps == 5 and env.task.metadata["r2e_row"]["repo_name"] == row["repo_name"]
    assert env.task.expected_output  # graded like the R2E row it came from
    assert env.seed(7) == [7]


def test_register_also_fills_a_fake_rllm_dataset_registry(tmp_path, monkeypatch):
    """Seed 001/002: with rLLM importable, `gp data register --rllm-layout` also calls rLLM's
    DatasetRegistry.register_dataset (a FAKE rllm.data module here: rLLM is not installable)."""
    calls: list[tuple[str, str, list]] = []

    class FakeDatasetRegistry:
        @classmethod
        def register_dataset(cls, name, data, split="default"):
            calls.append((name, split, list(data)))

    fake = types.ModuleType("rllm.data")
    fake.DatasetRegistry = FakeDatasetRegistry
    monkeypatch.setitem(sys.modules, "rllm", types.ModuleType("rllm"))
    monkeypatch.setitem(sys.modules, "rllm.data", fake)
    prepare_datasets(DataConfig(skip_r2e=True, swebench_dataset=str(SAMPLE / "swebench" / "test.jsonl"),
                                output_dir=str(tmp_path / "prep")))
    result = register_dataset(tmp_path / "prep" / "swebench" / "test.jsonl", "seeded", tmp_path / "reg", "test",
                              rllm_layout=True)
    assert [(n, s) for n, s, _ in calls] == [("seeded", "test")]
    assert len(calls[0][2]) == result.rows and json.loads(calls[0][2][0]["task"])["task_id"]
