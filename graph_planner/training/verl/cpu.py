"""verl 0.9.1 on a machine without a GPU: a ``cpu`` platform, the FSDP engine for ``cpu`` and an ``hf`` rollout.

verl ships no CPU platform and no rollout that runs without vLLM / SGLang / TensorRT-LLM. Its own extension hooks
are enough to add both, with no verl file edited (facts: ``reference/verl_on_cpu.md``):

- ``VERL_USE_EXTERNAL_MODULES=graph_planner.training.verl.cpu`` makes ``import verl`` import this module in every
  verl process (driver, TaskRunner, FSDP workers, agent-loop workers, rollout server);
- ``VERL_PLATFORM=cpu`` selects the :class:`CpuPlatform` registered here.

Both are set by the project in the Ray job's runtime env (:func:`cpu_job_env_vars`) when the cluster has no real
GPU, never by the user; on a GPU cluster neither is set and nothing here is imported. The platform keeps Ray's
``GPU`` resource name (the local head advertises one *logical* GPU so verl's resource pool schedules), uses gloo,
makes memory/cache/synchronize calls no-ops and answers ``current_device() == "cpu"`` so FSDP2 builds its mesh on
CPU. The ``hf`` rollout is one Ray actor per replica serving ``transformers.generate`` token-in/token-out (verl's
``TokenOutput``); the actor workers push the full state dict to it after every update (``update_weights``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Iterable
from contextlib import contextmanager
from functools import lru_cache
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

log = logging.getLogger(__name__)

#: ``VERL_PLATFORM`` value selecting :class:`CpuPlatform`.
PLATFORM_NAME = "cpu"
#: ``actor_rollout_ref.rollout.name`` of the transformers-generate rollout.
ROLLOUT_NAME = "hf"
#: Name prefix of the rollout server actors (``hf_server_<replica>_<node>``).
SERVER_PREFIX = f"{ROLLOUT_NAME}_"


def cpu_job_env_vars() -> dict[str, str]:
    """The runtime-env variables that load and select this module in every verl process of a CPU job."""
    return {"VERL_USE_EXTERNAL_MODULES": __name__, "VERL_PLATFORM": PLATFORM_NAME,
            # one intra-op thread per process: on a few cores, several verl processes share them
            "OMP_NUM_THREADS": "1"}


def cpu_hydra_overrides() -> dict[str, Any]:
    """verl overrides a CPU run needs on top of the translated config (``reference/verl_on_cpu.md``)."""
    return {
        "trainer.device": "cpu",
        "trainer.use_v1": False,  # the v1 trainer imports transfer_queue (not installed by the train extra)
        "actor_rollout_ref.rollout.name": ROLLOUT_NAME,
        "actor_rollout_ref.actor.strategy": "fsdp2",  # FSDP1's sync_module_states needs a GPU
        "actor_rollout_ref.ref.strategy": "fsdp2",
        "actor_rollout_ref.model.use_remove_padding": False,  # flash-attn varlen kernels
        "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",  # flash_attention_2 is the default
        "actor_rollout_ref.actor.fsdp_config.param_offload": False,
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload": False,
        "actor_rollout_ref.rollout.free_cache_engine": True,
        "data.dataloader_num_workers": 0,
        # the agent loop sets reward_score itself: one idle reward-loop actor instead of 8 verl imports on few cores
        "reward.num_workers": 1,
    }


# ---------------------------------------------------------------------------------------------------------------
# The platform
# ---------------------------------------------------------------------------------------------------------------

def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


def _zero(*_args: Any, **_kwargs: Any) -> int:
    return 0


def _mem_get_info(*_args: Any, **_kwargs: Any) -> tuple[int, int]:
    import psutil

    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


def _cpu_device_module() -> ModuleType:
    """``torch.cpu`` plus the ``torch.cuda``-style calls verl makes on ``get_torch_device()`` (no-ops here)."""
    module = ModuleType("graph_planner_cpu_device")
    for name in dir(torch.cpu):
        if not name.startswith("__"):
            setattr(module, name, getattr(torch.cpu, name))
    for name in ("empty_cache", "ipc_collect", "set_per_process_memory_fraction", "reset_peak_memory_stats",
                 "manual_seed", "manual_seed_all"):
        setattr(module, name, _noop)
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        setattr(module, name, _zero)
    module.mem_get_info = _mem_get_info  # type: ignore[attr-defined]
    module.get_rng_state = lambda *_a, **_k: torch.get_rng_state()  # type: ignore[attr-defined]
    module.set_rng_state = lambda state, *_a, **_k: torch.set_rng_state(state)  # type: ignore[attr-defined]
    module.get_device_name = lambda *_a, **_k: "cpu"  # type: ignore[attr-defined]
    module.is_available = lambda: True  # type: ignore[attr-defined]
    return module


def _register_platform() -> None:
    from verl.plugin.platform import PlatformBase, PlatformRegistry

    cpu_module = _cpu_device_module()

    @PlatformRegistry.register(platform=PLATFORM_NAME)
    class CpuPlatform(PlatformBase):
        """verl's platform interface on CPU: gloo, the fake Ray ``GPU`` resource, no-op memory calls."""

        device_name = "cpu"  # type: ignore[assignment]
        vendor_name = "cpu"  # type: ignore[assignment]
        device_module = cpu_module  # type: ignore[assignment]

        def is_available(self) -> bool:
            return True

        def is_platform_available(self, use_smi_check: bool = False) -> bool:
            return False  # never auto-detected: only VERL_PLATFORM=cpu selects it

        def current_device(self) -> str:  # type: ignore[override]
            return "cpu"  # FSDP2 gets device_id="cpu", not 0 (which it would read as cuda:0)

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: Any) -> None:
            return None

        def synchronize(self, device_index: Any = None) -> None:
            return None

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            return None

        def empty_cache(self) -> None:
            return None

        def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"  # Ray sets it for the logical GPU; torch (CPU build) ignores it

        @contextmanager
        def nvtx_range(self, msg: str):  # type: ignore[override]
            yield

        def profiler_start(self) -> None:
            return None

        def profiler_stop(self) -> None:
            return None

        def ray_resource_name(self) -> str:
            return "GPU"  # the head's logical GPU: verl's resource pool counts it

        def ray_noset_envvars(self) -> list[str]:
            return []

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> Any:
            return None


def _patch_process_group() -> None:
    """verl's workers ask for ``cpu:gloo,<device>:<backend>``, i.e. ``cpu:gloo,cpu:gloo`` here, which torch rejects
    ("Duplicate device type cpu"); on CPU one plain ``gloo`` group is the same thing."""
    from verl.utils import distributed
    from verl.workers import engine_workers

    original = distributed.initialize_global_process_group_ray

    def initialize_gloo(timeout_second: int | None = None, backend: str | None = None) -> None:
        original(timeout_second=timeout_second, backend=backend or "gloo")

    engine_workers.initialize_global_process_group_ray = initialize_gloo  # the name the workers call


def _patch_ref_offload() -> None:
    """verl's FSDP2 engine wraps a forward-only model (the reference policy of ``use_kl_loss``) in
    ``CPUOffloadPolicy(pin_memory=True)``; pinning host memory needs an accelerator ("Cannot access accelerator
    device when none is available"). On CPU the parameters live in host memory anyway: the same policy, unpinned."""
    from torch.distributed.fsdp import CPUOffloadPolicy
    from verl.workers.engine.fsdp import transformer_impl

    def unpinned(pin_memory: bool = True) -> CPUOffloadPolicy:
        return CPUOffloadPolicy(pin_memory=False)

    transformer_impl.CPUOffloadPolicy = unpinned  # the name _build_fsdp_module calls


def _register_engines() -> None:
    """The FSDP engine classes (registered by verl for cuda/npu only) for ``cpu`` as well."""
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    for model_type, cls in (("language_model", FSDPEngineWithLMHead), ("value_model", FSDPEngineWithValueHead)):
        for backend in ("fsdp", "fsdp2"):
            EngineRegistry._engines.setdefault(model_type, {}).setdefault(backend, {}).setdefault(PLATFORM_NAME, cls)


# ---------------------------------------------------------------------------------------------------------------
# The hf rollout: server actor, replica, worker-side adapter
# ---------------------------------------------------------------------------------------------------------------

class HFRolloutServer:
    """One rollout server: the HF model in this Ray actor, ``generate`` token-in/token-out.

    Requests run one at a time in a worker thread (the event loop stays free for the control calls); weights are
    replaced in place by :meth:`update_weights` between steps.
    """

    def __init__(self, model_path: str, trust_remote_code: bool, max_model_len: int | None, seed: int) -> None:
        from graph_planner.models.loading import load_causal_lm

        torch.manual_seed(seed)
        self.model = load_causal_lm(
            model_path, dtype=torch.float32, trust_remote_code=trust_remote_code, attn_implementation="sdpa")
        self.model.eval()
        limit = getattr(self.model.config, "max_position_embeddings", None)
        self.max_model_len = int(max_model_len or limit or 4096)
        self.global_steps: int | None = None
        self.weight_updates = 0
        self._lock = threading.Lock()

    def _generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> dict[str, Any]:
        room = self.max_model_len - len(prompt_ids)
        if room < 1:
            raise ValueError(f"prompt of {len(prompt_ids)} tokens leaves no room within max_model_len "
                             f"{self.max_model_len}")
        max_new = min(int(sampling_params.get("max_tokens") or sampling_params.get("max_new_tokens") or room), room)
        temperature = float(sampling_params.get("temperature", 1.0))
        top_k = int(sampling_params.get("top_k", -1))
        greedy = temperature <= 0
        kwargs: dict[str, Any] = {"do_sample": not greedy, "max_new_tokens": max_new,
                                  "return_dict_in_generate": True, "output_logits": True,
                                  "repetition_penalty": float(sampling_params.get("repetition_penalty", 1.0))}
        if not greedy:
            kwargs.update(temperature=temperature, top_p=float(sampling_params.get("top_p", 1.0)),
                          top_k=top_k if top_k > 0 else 0)
        config = self.model.generation_config
        input_ids = torch.tensor([prompt_ids], dtype=torch.long)
        seed = sampling_params.get("seed")  # per request (the agent loop's): the same draws in any request order
        with self._lock, torch.no_grad():
            if seed is not None:
                torch.manual_seed(int(seed))
            out = self.model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                      pad_token_id=config.pad_token_id, eos_token_id=config.eos_token_id, **kwargs)
        tokens = out.sequences[0, input_ids.shape[1]:].tolist()
        logprobs: list[float] | None = None
        if sampling_params.get("logprobs"):
            logits = torch.stack(out.logits, dim=1)[0].float()  # [new tokens, vocab], raw (as vLLM reports)
            chosen = torch.tensor(tokens, dtype=torch.long).unsqueeze(-1)
            logprobs = torch.log_softmax(logits, dim=-1).gather(-1, chosen).squeeze(-1).tolist()
        return {"token_ids": tokens, "log_probs": logprobs}

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       image_data: Any = None, video_data: Any = None, **kwargs: Any):  # -> TokenOutput
        from verl.workers.rollout.replica import TokenOutput

        result = await asyncio.to_thread(self._generate, list(prompt_ids), dict(sampling_params))
        return TokenOutput(token_ids=result["token_ids"], log_probs=result["log_probs"], stop_reason="completed",
                           num_preempted=0, extra_fields={"global_steps": self.global_steps})

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
        return {"global_steps": self.global_steps, "weight_updates": self.weight_updates}

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
            node_id = None
            if self.workers:
                node_id = await self.workers[0].__ray_call__.remote(
                    lambda _self: ray.get_runtime_context().get_node_id())
            options: dict[str, Any] = {"name": _server_name(self.replica_rank, 0, self.name_suffix),
                                       "num_cpus": 0, "max_concurrency": self.max_concurrency}
            if node_id is not None:
                options["scheduling_strategy"] = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    node_id=node_id, soft=False)
            model = self.model_config  # the trainer's DictConfig (HFModelConfig fields)
            server = ray.remote(HFRolloutServer).options(**options).remote(
                model_path=model.get("local_path") or model.path,
                trust_remote_code=bool(model.get("trust_remote_code", False)),
                max_model_len=self.config.max_model_len, seed=int(getattr(self.config, "seed", 0) or 0))
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


def _register_rollout() -> None:
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


def install() -> bool:
    """Register the platform, the cpu engines and the hf rollout; a no-op unless ``VERL_PLATFORM=cpu``."""
    if os.environ.get("VERL_PLATFORM", "").strip().lower() != PLATFORM_NAME:
        return False
    _register_platform()
    _register_engines()
    _register_rollout()
    _patch_process_group()
    _patch_ref_offload()
    return True


_INSTALLED = SimpleNamespace(done=install())
