"""Heartbeat: GPU (NVML) and Ray samples logged in the background, one notice when absent, prompt stop."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pynvml
import pytest

from graph_planner.config.schema import RunConfig
from graph_planner.telemetry.heartbeat import Heartbeat
from graph_planner.telemetry.trackers import InMemoryTracker, MultiTracker


def _nvml_works() -> bool:
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except pynvml.NVMLError:
        return False


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Two GPUs behind monkeypatched pynvml calls (no GPU exists on this machine)."""
    calls = {"init": 0, "shutdown": 0}
    used = [3 * 1024**3, 512 * 1024**2]

    def init() -> None:
        calls["init"] += 1

    def shutdown() -> None:
        calls["shutdown"] += 1

    monkeypatch.setattr(pynvml, "nvmlInit", init)
    monkeypatch.setattr(pynvml, "nvmlShutdown", shutdown)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", lambda: 2)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex", lambda i: i)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetUtilizationRates", lambda h: SimpleNamespace(gpu=[75, 5][h], memory=0))
    monkeypatch.setattr(pynvml, "nvmlDeviceGetMemoryInfo", lambda h: SimpleNamespace(used=used[h], total=80 * 1024**3))
    return calls


@pytest.mark.skipif(_nvml_works(), reason="a GPU is present: the no-GPU path cannot be observed")
def test_no_gpu_logs_once_and_keeps_going(caplog: pytest.LogCaptureFixture) -> None:
    mem = InMemoryTracker()
    beat = Heartbeat(mem, interval_s=60, log_gpu=True, log_ray=False)
    with caplog.at_level(logging.INFO, logger="graph_planner.telemetry.heartbeat"):
        for _ in range(3):
            assert beat.beat() == {}
    notices = [r for r in caplog.records if "GPU heartbeat off" in r.getMessage()]
    assert len(notices) == 1 and "NVML" in notices[0].getMessage()
    assert beat.samples == 3 and mem.rows == []


def test_fake_nvml_gpu_metrics_names_and_units(fake_nvml: dict[str, int]) -> None:
    tracker = MultiTracker({"mem": (mem := InMemoryTracker())})
    tracker.log({"reward/mean": 0.0}, step=12)
    beat = Heartbeat(tracker, interval_s=60, log_gpu=True, log_ray=False)
    metrics = beat.beat()
    assert metrics == {"gpu/0/util": 75.0, "gpu/0/mem_GB": 3.0, "gpu/1/util": 5.0, "gpu/1/mem_GB": 0.5}
    assert mem.rows[-1] == (12, metrics)  # logged at the tracker's current step
    beat.stop()
    assert fake_nvml == {"init": 1, "shutdown": 1}


def test_log_gpu_off_never_touches_nvml(fake_nvml: dict[str, int]) -> None:
    config = RunConfig.model_validate({"telemetry": {"log_gpu": False, "log_ray": False, "heartbeat_interval_s": 5}})
    beat = Heartbeat.from_config(config.telemetry, InMemoryTracker())
    assert beat.interval_s == 5 and beat.beat() == {}
    assert fake_nvml["init"] == 0


def test_ray_not_initialised_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    beat = Heartbeat(InMemoryTracker(), interval_s=60, log_gpu=False, log_ray=True)
    with caplog.at_level(logging.INFO, logger="graph_planner.telemetry.heartbeat"):
        for _ in range(3):
            assert beat.beat() == {}
    assert sum("Ray is not initialised" in r.getMessage() for r in caplog.records) == 1


def test_stop_is_prompt_with_long_interval(fake_nvml: dict[str, int]) -> None:
    mem = InMemoryTracker()
    beat = Heartbeat(mem, interval_s=60, log_gpu=True, log_ray=False).start()
    deadline = time.monotonic() + 5
    while not mem.rows and time.monotonic() < deadline:  # first sample is taken at once
        time.sleep(0.01)
    started = time.monotonic()
    beat.stop()
    assert time.monotonic() - started < 1.0
    assert len(mem.rows) == 1 and "gpu/1/util" in mem.rows[0][1]


def test_context_manager_samples_at_interval(fake_nvml: dict[str, int]) -> None:
    mem = InMemoryTracker()
    with Heartbeat(mem, interval_s=0.05, log_gpu=True, log_ray=False) as beat:
        time.sleep(0.4)
    count = beat.samples
    assert count >= 3
    time.sleep(0.15)
    assert beat.samples == count  # the thread is gone after __exit__


def test_failing_tracker_does_not_kill_heartbeat(fake_nvml: dict[str, int], caplog: pytest.LogCaptureFixture) -> None:
    class Broken(InMemoryTracker):
        def log(self, metrics: dict[str, float], step: int) -> None:
            raise OSError("disk full")

    beat = Heartbeat(Broken(), interval_s=60, log_gpu=True, log_ray=False)
    with caplog.at_level(logging.INFO, logger="graph_planner.telemetry.heartbeat"):
        beat.beat()
        beat.beat()
    assert sum("disk full" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.ray
def test_real_ray_available_resources_logged() -> None:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=1, num_gpus=0, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        mem = InMemoryTracker()
        metrics = Heartbeat(mem, interval_s=60, log_gpu=False, log_ray=True).beat()
    finally:
        ray.shutdown()
    assert metrics == {"ray/cpus_avail": 1.0, "ray/gpus_avail": 0.0}
    assert mem.rows == [(0, metrics)]
