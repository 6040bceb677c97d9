"""verl 0.9.1 on a machine without a GPU: a ``cpu`` platform and the FSDP engine for ``cpu``.

verl ships no CPU platform. Its own extension hooks are enough to add one, with no verl file edited (facts:
``reference/verl_on_cpu.md``); the rollout it runs with is the ``hf`` rollout of
:mod:`graph_planner.training.verl.hf_rollout`, which is not CPU-specific and is loaded on every cluster:

- ``VERL_USE_EXTERNAL_MODULES=graph_planner.training.verl.cpu`` makes ``import verl`` import this module in every
  verl process (driver, TaskRunner, FSDP workers, agent-loop workers, rollout server);
- ``VERL_PLATFORM=cpu`` selects the :class:`CpuPlatform` registered here.

Both are set by the project in the Ray job's runtime env (:func:`cpu_job_env_vars`) when the cluster has no real
GPU, never by the user; on a GPU cluster neither is set and nothing here is imported. The platform keeps Ray's
``GPU`` resource name (the local head advertises one *logical* GPU so verl's resource pool schedules), uses gloo,
makes memory/cache/synchronize calls no-ops and answers ``current_device() == "cpu"`` so FSDP2 builds its mesh on
CPU, and patches two verl calls that assume an accelerator (the process group, the reference model's pinned
offload). :func:`install` applies all of it only when ``VERL_PLATFORM=cpu``: with another platform (a GPU) this
module changes nothing.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

from graph_planner.training.verl.hf_rollout import ROLLOUT_NAME

log = logging.getLogger(__name__)

#: ``VERL_PLATFORM`` value selecting :class:`CpuPlatform`.
PLATFORM_NAME = "cpu"


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
        # the agent loop sets reward_score itself, so verl never asks a reward-loop worker (it would only for a
        # missing score or a colocated reward model): none is started, one `import verl` process fewer per job
        "reward.num_workers": 0,
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


def cpu_platform_selected() -> bool:
    """The platform check: ``VERL_PLATFORM=cpu`` (set only in a CPU job's runtime env)."""
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME


def install() -> bool:
    """Register the platform and the cpu engines, patch the process group and the reference model's offload; a
    no-op unless :func:`cpu_platform_selected`."""
    if not cpu_platform_selected():
        return False
    from graph_planner.training.verl import hf_rollout

    _register_platform()
    _register_engines()
    _patch_process_group()
    _patch_ref_offload()
    hf_rollout.register()  # the only rollout there is on CPU (a job env that did not list hf_rollout still has it)
    return True


_INSTALLED = SimpleNamespace(done=install())
