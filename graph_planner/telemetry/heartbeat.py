"""Background heartbeat: GPU utilisation/memory (nvidia-ml-py) and free Ray resources, logged every few seconds.

Without a GPU or without Ray the heartbeat says so once (python logging) and keeps sampling what is there; it
is a daemon thread woken by an Event, so `stop()` returns at once even with a long interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import pynvml
from typing_extensions import Self

from graph_planner.config.schema import TelemetryConfig

log = logging.getLogger(__name__)

_BYTES_PER_GB = 1024**3  # GiB, as verl's perf/max_memory_*_gb


class _LogsMetrics(Protocol):
    def log(self, metrics: dict[str, float], step: int) -> None: ...


class Heartbeat:
    """Samples ``gpu/<idx>/util`` (%), ``gpu/<idx>/mem_GB`` (used, GiB), ``ray/cpus_avail``, ``ray/gpus_avail``.

    Each sample is logged at ``step_fn()``; by default the tracker's ``last_step`` (a `MultiTracker`), else 0.
    """

    def __init__(
        self,
        tracker: _LogsMetrics,
        interval_s: float = 30.0,
        log_gpu: bool = True,
        log_ray: bool = True,
        step_fn: Callable[[], int] | None = None,
        join_timeout_s: float = 5.0,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"Heartbeat interval_s must be > 0 (telemetry.heartbeat_interval_s), got {interval_s}")
        self.tracker = tracker
        self.interval_s = interval_s
        self.log_gpu = log_gpu
        self.log_ray = log_ray
        self.step_fn = step_fn or (lambda: int(getattr(tracker, "last_step", 0)))
        self.join_timeout_s = join_timeout_s
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None  # the pynvml module once initialised
        self._gpu_handles: list[Any] = []
        self._said: set[str] = set()

    @classmethod
    def from_config(cls, t: TelemetryConfig, tracker: _LogsMetrics) -> Heartbeat:
        """A heartbeat with the run's ``telemetry`` section settings."""
        return cls(tracker, t.heartbeat_interval_s, log_gpu=t.log_gpu, log_ray=t.log_ray)

    def _once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._said:
            self._said.add(key)
            log.info(message, *args)

    def _init_gpu(self) -> None:
        try:
            pynvml.nvmlInit()
            self._gpu_handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except (pynvml.NVMLError, OSError) as exc:  # LibraryNotFound / DriverNotLoaded: no GPU here
            self.log_gpu = False
            self._once("gpu", "GPU heartbeat off: NVML unavailable (%s); continuing without gpu/* metrics", exc)
            return
        self._nvml = pynvml
        if not self._gpu_handles:
            self._once("gpu", "GPU heartbeat: NVML found no GPU; continuing without gpu/* metrics")

    def sample_gpu(self) -> dict[str, float]:
        if self._nvml is None:
            return {}
        out: dict[str, float] = {}
        for idx, handle in enumerate(self._gpu_handles):
            util = self._nvml.nvmlDeviceGetUtilizationRates(handle)
            mem = self._nvml.nvmlDeviceGetMemoryInfo(handle)
            out[f"gpu/{idx}/util"] = float(util.gpu)
            out[f"gpu/{idx}/mem_GB"] = mem.used / _BYTES_PER_GB
        return out

    def sample_ray(self) -> dict[str, float]:
        try:
            import ray
        except ImportError:
            self.log_ray = False
            self._once("ray", "Ray heartbeat off: ray is not installed; continuing without ray/* metrics")
            return {}
        if not ray.is_initialized():  # may be initialised later: keep checking, say it once
            self._once("ray", "Ray heartbeat: Ray is not initialised; ray/* metrics start when it is")
            return {}
        free = ray.available_resources()
        return {"ray/cpus_avail": float(free.get("CPU", 0.0)), "ray/gpus_avail": float(free.get("GPU", 0.0))}

    def sample(self) -> dict[str, float]:
        """One sample of everything enabled (also usable without the thread)."""
        metrics: dict[str, float] = {}
        if self.log_gpu:
            if self._nvml is None:
                self._init_gpu()
            metrics.update(self.sample_gpu())
        if self.log_ray:
            metrics.update(self.sample_ray())
        return metrics

    def beat(self) -> dict[str, float]:
        """Sample and log once; errors are logged (once per kind) and never stop the heartbeat."""
        try:
            metrics = self.sample()
            if metrics:
                self.tracker.log(metrics, self.step_fn())
            self.samples += 1
            return metrics
        except Exception as exc:  # noqa: BLE001 - a heartbeat must outlive any sampling or tracker failure
            self._once(f"error:{type(exc).__name__}", "heartbeat sample failed (%s: %s); will retry",
                       type(exc).__name__, exc)
            return {}

    def _run(self) -> None:
        while not self._stop.is_set():
            self.beat()
            self._stop.wait(self.interval_s)

    def start(self) -> Heartbeat:
        if self._thread is not None:
            raise RuntimeError("Heartbeat already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gp-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Wake the thread and wait at most ``join_timeout_s``; a stuck sample (hung Ray GCS) cannot block exit."""
        self._stop.set()
        if self._thread is not None:
            started = time.monotonic()
            self._thread.join(self.join_timeout_s)
            if self._thread.is_alive():
                log.warning("heartbeat thread still busy after %.1fs; leaving it (daemon)", time.monotonic() - started)
                self._thread = None
                return  # NVML stays up: the busy thread may still be reading it
            self._thread = None
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as exc:
                log.debug("nvmlShutdown: %s", exc)
            self._nvml = None
            self._gpu_handles = []

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
