"""The ``hf`` rollout of verl 0.9.1: ``transformers.generate`` token-in/token-out, on CPU or on one GPU.

verl 0.9.1 ships no rollout that runs without vLLM / SGLang / TensorRT-LLM. This module adds one through verl's own
registries (no verl file edited): one :class:`HFRolloutServer` Ray actor per replica, serving verl's
``TokenOutput`` (with log-probs and the weight version), and a worker-side adapter whose ``update_weights`` pushes
the actor's full state dict to it after every update (all tensors must match the rollout model).

It is independent of the CPU platform (:mod:`graph_planner.training.verl.cpu`): the Ray job lists this module in
``VERL_USE_EXTERNAL_MODULES`` on every cluster, so ``import verl`` registers the ``hf`` rollout in every verl
process, and ``actor_rollout_ref.rollout.name=hf`` (``training.rollout_engine: hf``) picks it. On a GPU the server
runs on its actor worker's GPU (``cuda`` when torch sees one; the CPU otherwise); registering it changes nothing
for a run that asks for vLLM or SGLang.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Iterable
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import torch

log = logging.getLogger(__name__)

#: ``actor_rollout_ref.rollout.name`` of the transformers-generate rollout.
ROLLOUT_NAME = "hf"
#: Name prefix of the rollout server actors (``hf_server_<replica>_<node>``).
SERVER_PREFIX = f"{ROLLOUT_NAME}_"


class HFRolloutServer:
    """One rollout server: the HF model in this Ray actor, ``generate`` token-in/token-out.

    Requests run one at a time in a worker thread (the event loop stays free for the control calls); weights are
    replaced in place by :meth:`update_weights` between steps.
    """

    def __init__(self, model_path: str, trust_remote_code: bool, max_model_len: int | None, seed: int,
                 visible_devices: str | None = None) -> None:
        from graph_planner.models.loading import load_causal_lm

        if visible_devices:  # the actor worker's GPU (Ray leaves this actor's CUDA_VISIBLE_DEVICES to us)
            os.environ["CUDA_VISIBLE_DEVICES"] = visible_devices
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        torch.manual_seed(seed)
        self.model = load_causal_lm(
            model_path, dtype=torch.float32, trust_remote_code=trust_remote_code, attn_implementation="sdpa")
        self.model.to(self.device).eval()
        # one line in the job log (Ray forwards actor stdout; logging below WARNING is not shown there)
        print(f"hf rollout server: model on {self.device} ({model_path})", flush=True)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        self.max_model_len = int(max_model_len or limit or 4096)
        self.global_steps: int | None = None
        self.weight_updates = 0
        self._lock = threading.Lock()

    @staticmethod
    def _generate_kwargs(sampling_params: dict[str, Any], max_new: int) -> dict[str, Any]:
        temperature = float(sampling_params.get("temperature", 1.0))
        top_k = int(sampling_params.get("top_k", -1))
        greedy = temperature <= 0
        kwargs: dict[str, Any] = {"do_sample": not greedy, "max_new_tokens": max_new,
                                  "return_dict_in_generate": True, "output_logits": True,
                                  "repetition_penalty": float(sampling_params.get("repetition_penalty", 1.0))}
        if not greedy:
            kwargs.update(temperature=temperature, top_p=float(sampling_params.get("top_p", 1.0)),
                          top_k=top_k if top_k > 0 else 0)
        return kwargs

    def _generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> dict[str, Any]:
        """One request: a round of one row (the same generate, budget, stop and log-prob rules)."""
        row = {"prompt_ids": prompt_ids,
               "max_tokens": sampling_params.get("max_tokens") or sampling_params.get("max_new_tokens")}
        return self._generate_batch([row], sampling_params)[0]

    def _generate_batch(self, rows: list[dict[str, Any]], sampling_params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every row in ONE left-padded ``generate`` (a lockstep round, :mod:`graph_planner.training.verl.lockstep`,
        or a single request), each row cut to its own ``max_tokens`` and first stop token; seeded once by
        ``sampling_params["seed"]`` (per request: the same draws in any request order)."""
        prompts = [list(row["prompt_ids"]) for row in rows]
        budgets = []
        for i, (row, ids) in enumerate(zip(rows, prompts)):
            room = self.max_model_len - len(ids)
            if room < 1:
                where = f"batch row {i}: " if len(rows) > 1 else ""
                raise ValueError(f"{where}prompt of {len(ids)} tokens leaves no room within max_model_len "
                                 f"{self.max_model_len}")
            budgets.append(min(int(row.get("max_tokens") or room), room))
        config = self.model.generation_config
        pad = config.pad_token_id if config.pad_token_id is not None else _first(config.eos_token_id)
        width = max(len(ids) for ids in prompts)
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in prompts], dtype=torch.long,
                                 device=self.device)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts], dtype=torch.long,
                                 device=self.device)
        kwargs = self._generate_kwargs(sampling_params, max(budgets))
        stop_ids = set(_as_list(config.eos_token_id))
        seed = sampling_params.get("seed")
        with self._lock, torch.no_grad():
            if seed is not None:
                torch.manual_seed(int(seed))
            out = self.model.generate(input_ids=input_ids, attention_mask=attention, pad_token_id=pad,
                                      eos_token_id=config.eos_token_id, **kwargs)
        generated = out.sequences[:, width:].tolist()
        logits = torch.stack(out.logits, dim=1).float().cpu() if sampling_params.get("logprobs") else None
        answers = []
        for r, (tokens, budget) in enumerate(zip(generated, budgets)):
            length = next((i + 1 for i, t in enumerate(tokens[:budget]) if t in stop_ids), min(budget, len(tokens)))
            tokens = tokens[:length]
            logprobs = None
            if logits is not None:
                chosen = torch.tensor(tokens, dtype=torch.long).unsqueeze(-1)
                logprobs = torch.log_softmax(logits[r, :length], dim=-1).gather(-1, chosen).squeeze(-1).tolist()
            answers.append({"token_ids": tokens, "log_probs": logprobs})
        return answers

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       image_data: Any = None, video_data: Any = None, **kwargs: Any):  # -> TokenOutput
        from verl.workers.rollout.replica import TokenOutput

        from graph_planner.training.verl.lockstep import BATCH_KEY

        params = dict(sampling_params)
        rows = params.pop(BATCH_KEY, None)
        extra: dict[str, Any] = {"global_steps": self.global_steps}
        if rows is not None:  # a lockstep round: the rows' answers in extra_fields, in row order
            extra[BATCH_KEY] = await asyncio.to_thread(self._generate_batch, list(rows), params)
            return TokenOutput(token_ids=[], log_probs=None, stop_reason="completed", num_preempted=0,
                               extra_fields=extra)
        result = await asyncio.to_thread(self._generate, list(prompt_ids), params)
        return TokenOutput(token_ids=result["token_ids"], log_probs=result["log_probs"], stop_reason="completed",
                           num_preempted=0, extra_fields=extra)

    async def update_weights(self, state: dict[str, torch.Tensor], global_steps: int | None = None) -> dict[str, int]:
        """Load the actor's full state dict; returns how many tensors matched (all of them, or it raises)."""
        def load() -> dict[str, int]:
            with self._lock, torch.no_grad():
                own = self.model.state_dict()
                unknown = [name for name in state if name not in own]
                if unknown:
                    raise KeyError(f"hf rollout: actor tensors not in the rollout model: {unknown[:5]}")
                for name, tensor in state.items():
                    own[name].copy_(tensor.to(own[name].dtype))
            return {"matched": len(state), "model_tensors": len(own)}

        counts = await asyncio.to_thread(load)
        self.weight_updates += 1
        if global_steps is not None:
            self.global_steps = global_steps
        return counts

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def get_status(self) -> dict[str, Any]:
        return {"global_steps": self.global_steps, "weight_updates": self.weight_updates, "device": str(self.device)}

    # verl's replica control calls: nothing to free or pause for an in-process HF model
    async def wake_up(self, tags: list[str] | None = None) -> None: ...
    async def sleep(self) -> None: ...
    async def clear_kv_cache(self) -> None: ...
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def wait_for_requests_to_drain(self) -> None: ...
    async def resume_generation(self) -> None: ...
    async def start_profile(self, **kwargs: Any) -> None: ...
    async def stop_profile(self) -> None: ...

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict[str, Any]:
        return {"aborted": False, "request_id": request_id}


def _as_list(ids: int | list[int] | None) -> list[int]:
    return [] if ids is None else [ids] if isinstance(ids, int) else list(ids)


def _first(ids: int | list[int] | None) -> int:
    return (_as_list(ids) or [0])[0]


def _server_name(replica_rank: int, node_rank: int = 0, suffix: str = "") -> str:
    return f"{SERVER_PREFIX}server_{replica_rank}_{node_rank}{suffix}"


@lru_cache(maxsize=1)
def _replica_class() -> type:
    import ray
    from verl.workers.rollout.replica import RolloutReplica

    class HFReplica(RolloutReplica):
        """One :class:`HFRolloutServer` actor per replica (tensor parallelism is 1: the model fits one process)."""

        async def launch_servers(self) -> None:
            if self.world_size != 1:
                raise ValueError(f"the hf rollout serves one process per replica; set rollout tensor/data/pipeline "
                                 f"parallel sizes to 1 (world size {self.world_size})")
            from verl.plugin.platform import get_platform
            from verl.utils.device import get_resource_name

            node_id, devices = None, None
            if self.workers:  # the server sits on its actor worker's node and, on a GPU, uses that worker's GPU
                node_id, devices = await self.workers[0].__ray_call__.remote(
                    lambda _self: (ray.get_runtime_context().get_node_id(),
                                   ray.get_runtime_context().get_accelerator_ids().get(get_resource_name())))
            platform = get_platform()
            options: dict[str, Any] = {
                "name": _server_name(self.replica_rank, 0, self.name_suffix), "num_cpus": 0,
                "max_concurrency": self.max_concurrency,
                # as verl's vLLM servers: Ray does not set the server's visible devices, the server does
                "runtime_env": {"env_vars": {**{var: "1" for var in platform.ray_noset_envvars() or []},
                                             **platform.rollout_env_vars()}}}
            if node_id is not None:
                options["scheduling_strategy"] = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    node_id=node_id, soft=False)
            model = self.model_config  # the trainer's DictConfig (HFModelConfig fields)
            server = ray.remote(HFRolloutServer).options(**options).remote(
                model_path=model.get("local_path") or model.path,
                trust_remote_code=bool(model.get("trust_remote_code", False)),
                max_model_len=self.config.max_model_len, seed=int(getattr(self.config, "seed", 0) or 0),
                visible_devices=",".join(str(d) for d in devices) if devices and platform.device_name != "cpu"
                else None)
            await server.get_status.remote()  # surfaces a model load error here, not at the first request
            self.servers = [server]
            self._server_handle = server
            self._server_address = f"{SERVER_PREFIX}replica-{self.replica_rank}{self.name_suffix}"

        def rollout_worker_use_gpu(self) -> bool:
            return False

    return HFReplica


@lru_cache(maxsize=1)
def _adapter_class() -> type:
    import ray
    from verl.workers.rollout.base import BaseRollout

    class HFServerAdapter(BaseRollout):
        """Worker side of the hf rollout (inside each FSDP actor worker): pushes weights to its server."""

        def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
            super().__init__(config, model_config, device_mesh)
            rank = int(os.environ.get("RANK", "0"))
            world = (self.config.tensor_model_parallel_size * self.config.data_parallel_size
                     * self.config.pipeline_model_parallel_size)
            self.replica_rank = rank // world if replica_rank == -1 else replica_rank
            self.is_leader = rank % world == 0
            self.server: Any = None
            self.last_sync: dict[str, Any] = {}

        async def resume(self, tags: list[str]) -> None:
            return None

        async def release(self) -> None:
            return None

        async def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]], global_steps: int | None = None,
                                 wire_format: str = "named_tensors", **kwargs: Any) -> None:
            if wire_format != "named_tensors":
                raise NotImplementedError(f"hf rollout: wire_format {wire_format!r} (only named_tensors)")
            started = time.perf_counter()
            # every rank consumes the generator: materialising a sharded tensor is a collective
            state = {name: tensor.detach().to("cpu", copy=True) for name, tensor in weights}
            if not self.is_leader:
                return
            if self.server is None:
                self.server = ray.get_actor(_server_name(self.replica_rank))
            counts = await self.server.update_weights.remote(state, global_steps)
            self.last_sync = {**counts, "seconds": round(time.perf_counter() - started, 4), "step": global_steps}
            log.info("hf rollout: weights synced to replica %d: %s", self.replica_rank, self.last_sync)

    return HFServerAdapter


def register() -> None:
    """Register the ``hf`` rollout replica and worker adapter in verl's registries (idempotent)."""
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    RolloutReplicaRegistry.register(ROLLOUT_NAME, _replica_class)
    base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{__name__}.HFServerAdapter"


def __getattr__(name: str) -> Any:
    """``HFServerAdapter`` / ``HFReplica`` are built on first use (verl imports them by dotted name)."""
    if name == "HFServerAdapter":
        return _adapter_class()
    if name == "HFReplica":
        return _replica_class()
    raise AttributeError(name)


def listed_for_verl() -> bool:
    """True when the job's ``VERL_USE_EXTERNAL_MODULES`` names this module, i.e. ``import verl`` is loading it."""
    return __name__ in {m.strip() for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",")}


#: Registered on import only when verl loads this module; ``import`` elsewhere (tests, tools) imports no verl.
_REGISTERED = SimpleNamespace(done=listed_for_verl() and (register() or True))
