"""verl's CPU path (graph_planner.training.verl.cpu) and the hf rollout (graph_planner.training.verl.hf_rollout)
with the real verl 0.9.1 and the toy model, no Ray:

- with ``VERL_PLATFORM=cpu`` (what a CPU job's runtime env sets) ``import verl`` loads the CPU path: platform
  ``cpu`` with gloo and ``current_device() == "cpu"``, the FSDP engine for cpu, the process-group and reference
  offload patches, and the ``hf`` rollout replica and adapter;
- on a GPU cluster's job env the ``hf`` rollout is registered and none of the CPU path is applied;
- the hf rollout server generates token-in/token-out with log-probs and serves the actor's new weights.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

from graph_planner.config.loader import load_run_config
from graph_planner.models.toy import ensure_toy_checkpoint
from graph_planner.training.ray.job import Cluster, prepare_job
from graph_planner.training.verl.compat import trl_lacks_value_head
from graph_planner.training.verl.hf_rollout import HFRolloutServer

PROBE = """
import json, verl
from verl.utils.device import get_device_name, get_nccl_backend, get_device_id
from verl.workers.rollout.replica import RolloutReplicaRegistry
from verl.workers.rollout import base
from verl.workers.engine.base import EngineRegistry
from verl.models.transformers import monkey_patch
from verl.plugin.platform import PlatformRegistry
from verl.utils import distributed
from verl.workers import engine_workers
from verl.workers.engine.fsdp import transformer_impl
from torch.distributed.fsdp import CPUOffloadPolicy
out = {"trl_seen_by_verl": monkey_patch.is_trl_available(), "device": get_device_name(), "backend": get_nccl_backend(), "hf_replica": "hf" in RolloutReplicaRegistry._registry,
       "hf_adapter": ("hf", "async") in base._ROLLOUT_REGISTRY,
       "cpu_patches": {"platform": "cpu" in PlatformRegistry.registered_names(),
                       "engine": "cpu" in EngineRegistry._engines.get("language_model", {}).get("fsdp2", {}),
                       "process_group": engine_workers.initialize_global_process_group_ray
                                        is not distributed.initialize_global_process_group_ray,
                       "ref_offload": transformer_impl.CPUOffloadPolicy is not CPUOffloadPolicy}}
if out["hf_replica"]:
    out["adapter"] = base.get_rollout_class("hf").__name__
    out["replica"] = RolloutReplicaRegistry.get("hf").__name__
if out["device"] == "cpu":  # on the faked cuda platform there is no device to ask for
    out["device_id"] = get_device_id()
    out["engine"] = EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__
print("PROBE " + json.dumps(out))
"""


def probe(env_vars: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_PLATFORM", "VERL_USE_EXTERNAL_MODULES")}
    done = subprocess.run([sys.executable, "-c", PROBE], env={**env, **env_vars}, capture_output=True, text=True,
                          timeout=300, cwd=os.getcwd())
    lines = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][6:])


def job_verl_env(cpu_platform: bool) -> dict[str, str]:
    """The VERL_* variables of the job's runtime env on a GPU-less local head / on a GPU cluster."""
    spec = prepare_job(load_run_config(None, {"training.backend": "verl"}), ["--config-file", "x.yaml"],
                       Cluster("http://head:8265", cpu_platform=cpu_platform))
    return {k: v for k, v in spec.runtime_env["env_vars"].items() if k.startswith("VERL_P") or k == "OMP_NUM_THREADS"
            or k == "VERL_USE_EXTERNAL_MODULES"}


@pytest.mark.slow  # a fresh `import verl` in a subprocess: ~10 s idle, more on a loaded machine
def test_cpu_job_env_loads_the_cpu_platform_engine_and_hf_rollout_in_verl():
    out = probe(job_verl_env(cpu_platform=True))
    expected_trl = importlib.util.find_spec("trl") is not None and not trl_lacks_value_head()
    all_patches = {"platform": True, "engine": True, "process_group": True, "ref_offload": True}
    assert out == {"device": "cpu", "backend": "gloo", "hf_replica": True, "hf_adapter": True, "device_id": "cpu",
                   "engine": "FSDPEngineWithLMHead", "adapter": "HFServerAdapter", "replica": "HFReplica",
                   "cpu_patches": all_patches,
                   "trl_seen_by_verl": expected_trl}  # a trl without the value head class is hidden from verl


@pytest.mark.slow
def test_gpu_cluster_job_env_with_the_cuda_platform_faked_registers_hf_rollout_without_cpu_patches():
    """A GPU cluster's job env (no VERL_PLATFORM=cpu) with verl's platform check faked to ``nvidia`` (this machine
    has no GPU: VERL_PLATFORM=nvidia is what verl's detection answers on one): the hf rollout is there for
    ``rollout.name=hf``, and none of the CPU patches is applied."""
    env = job_verl_env(cpu_platform=False)
    assert "VERL_PLATFORM" not in env and "verl.cpu" not in env["VERL_USE_EXTERNAL_MODULES"]
    assert "graph_planner.training.verl.hf_rollout" in env["VERL_USE_EXTERNAL_MODULES"].split(",")
    out = probe({**env, "VERL_PLATFORM": "nvidia"})
    assert out["device"] == "cuda" and out["backend"] == "nccl"
    assert out["hf_replica"] is True and out["hf_adapter"] is True and out["replica"] == "HFReplica"
    assert out["cpu_patches"] == {"platform": False, "engine": False, "process_group": False, "ref_offload": False}


@pytest.fixture(scope="module")
def toy_path(tmp_path_factory) -> str:
    return str(ensure_toy_checkpoint(tmp_path_factory.mktemp("toy")))


def test_hf_rollout_server_generates_tokens_with_logprobs_and_takes_new_weights(toy_path):
    server = HFRolloutServer(toy_path, trust_remote_code=False, max_model_len=None, seed=0)
    expected_device = "cuda" if torch.cuda.is_available() else "cpu"  # the GPU check runs this test on one
    assert server.model.device.type == expected_device
    assert asyncio.run(server.get_status())["device"].startswith(expected_device)
    prompt = list(range(5, 25))
    greedy = {"temperature": 0, "max_tokens": 6, "logprobs": True}
    first = asyncio.run(server.generate(prompt, greedy, request_id="a"))
    assert 1 <= len(first.token_ids) <= 6 and len(first.log_probs) == len(first.token_ids)
    assert all(lp <= 0 for lp in first.log_probs) and first.stop_reason == "completed"
    assert first.extra_fields["global_steps"] is None

    # the actor's update: every tensor replaced (here: the last layer's MLP scaled), tagged with the step
    state = {name: t.clone() for name, t in server.model.state_dict().items()}
    changed = "model.layers.1.mlp.down_proj.weight"
    state[changed] *= -3.0
    counts = asyncio.run(server.update_weights(state, global_steps=1))
    assert counts["matched"] == len(state)
    assert torch.equal(server.model.state_dict()[changed], state[changed])
    second = asyncio.run(server.generate(prompt, greedy, request_id="b"))
    assert second.extra_fields["global_steps"] == 1
    assert second.log_probs != first.log_probs  # new weights, new distribution

    with pytest.raises(KeyError, match="not in the rollout model"):
        asyncio.run(server.update_weights({"no.such.weight": torch.zeros(1)}))
    with pytest.raises(ValueError, match="no room within max_model_len"):
        server._generate(list(range(server.max_model_len)), greedy)


def test_hf_rollout_server_draws_the_same_sample_for_the_same_request_seed_in_any_order(toy_path):
    """The agent loop seeds every request (run seed, task, episode, turn): requests reach the server in the order
    the sandboxes answer, and the same run must still draw the same episodes."""
    server = HFRolloutServer(toy_path, trust_remote_code=False, max_model_len=None, seed=0)
    prompt = list(range(5, 25))

    def sample(seed: int) -> list[int]:
        params = {"temperature": 1.0, "max_tokens": 12, "seed": seed}
        return asyncio.run(server.generate(prompt, params, request_id=str(seed))).token_ids

    a, b = sample(11), sample(12)
    assert sample(12) == b and sample(11) == a  # the other order, the same draws
    assert a != b  # the seed decides the draw (an untrained toy model samples near-uniformly)


def test_hf_rollout_server_answers_a_lockstep_round_row_by_row_as_single_requests_would(toy_path):
    """One batched call (graph_planner/training/verl/lockstep.py) for rows of different lengths and budgets: each
    row greedily gets the tokens it gets alone, cut to its own max_tokens, with the same log-probs (float32, left
    padding); a seeded round draws the same tokens again."""
    server = HFRolloutServer(toy_path, trust_remote_code=False, max_model_len=None, seed=0)
    prompts = [list(range(5, 5 + n)) for n in (20, 7, 64, 300)]
    budgets = [10, 3, 10, 6]
    greedy = {"temperature": 0, "logprobs": True}
    alone = [asyncio.run(server.generate(p, {**greedy, "max_tokens": b}, request_id="a")) for p, b in
             zip(prompts, budgets)]
    rows = [{"request_id": str(i), "prompt_ids": p, "max_tokens": b, "seed": i}
            for i, (p, b) in enumerate(zip(prompts, budgets))]
    out = asyncio.run(server.generate(prompts[0], {**greedy, "max_tokens": 10, "batch": rows}, request_id="r"))
    answers = out.extra_fields["batch"]
    assert out.extra_fields["global_steps"] is None and len(answers) == len(rows)
    for single, answer, budget in zip(alone, answers, budgets):
        assert answer["token_ids"] == single.token_ids and len(answer["token_ids"]) <= budget
        assert answer["log_probs"] == pytest.approx(single.log_probs, abs=1e-4)

    def sample(seed: int) -> list[list[int]]:
        params = {"temperature": 1.0, "max_tokens": 12, "seed": seed, "batch": rows}
        return [a["token_ids"] for a in asyncio.run(server.generate([1], params, request_id="s")).extra_fields["batch"]]

    assert sample(5) == sample(5) != sample(6)
    with pytest.raises(ValueError, match="batch row 1: .* no room"):
        server._generate_batch([rows[0], {**rows[1], "prompt_ids": list(range(server.max_model_len))}], greedy)


def test_windowed_model_dir_is_the_same_weights_attending_to_the_last_n_tokens(toy_path, tmp_path):
    """training.attention_window: the toy Llama checkpoint as Mistral with a sliding window, weights linked; within
    the window it computes exactly what the original does, and other model types are refused by field name."""
    from transformers import AutoModelForCausalLM

    from graph_planner.models.attention_window import windowed_model_dir

    out = windowed_model_dir(toy_path, 16, tmp_path / "windowed")
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "mistral" and config["sliding_window"] == 16
    assert (out / "model.safetensors").is_symlink() and (out / "tokenizer.json").is_file()
    original = AutoModelForCausalLM.from_pretrained(toy_path, attn_implementation="sdpa").eval()
    windowed = AutoModelForCausalLM.from_pretrained(out, attn_implementation="sdpa").eval()
    ids = torch.arange(5, 45).unsqueeze(0)
    with torch.no_grad():
        assert torch.allclose(original(ids[:, :16]).logits, windowed(ids[:, :16]).logits)
        assert not torch.allclose(original(ids).logits[0, -1], windowed(ids).logits[0, -1])  # 40 tokens > 16

    other = tmp_path / "qwen"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    with pytest.raises(ValueError, match="training.attention_window"):
        windowed_model_dir(other, 16, tmp_path / "refused")
