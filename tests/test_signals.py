"""SIGTERM / SIGINT end every long `gp` command within a bound: exit 143 / 130, one line, no traceback, no sandbox
copy left (graph_planner.termination). Schedulers, Prefect cancellation, Kubernetes and Slurm stop jobs with SIGTERM.

The "in-copy" cases signal while the sandbox-copy lock is held: gp runs through a launcher that slows the first
repository copy (the timing is the only thing faked; the lock, the copy and the handler are the real ones). Before
graph_planner.termination, the SIGTERM handler waited there for the lock its own thread held, for good.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from graph_planner.env.samples import LOCAL_DEBUG_CONFIG

ROOT = Path(__file__).resolve().parents[1]
BOUND_S = 15.0
START_TIMEOUT_S = 120.0

pytestmark = pytest.mark.slow

# gp, with the first repository copy made slow when asked (a marker file says the copy lock is held).
LAUNCHER = textwrap.dedent("""
    import os, shutil, signal, sys, time, types
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a terminal user's Ctrl-C (this test may run as a background job)
    slow_copy = sys.argv.pop(1) == "slow-copy"
    if slow_copy:
        from graph_planner.sandbox import local_copies
        marker, done = os.path.join(os.environ["TMPDIR"], "in-copy"), []
        def copytree(*args, **kwargs):
            if not done:
                done.append(1)
                open(marker, "w").close()
                time.sleep(60)  # the copy lock is held meanwhile
            return shutil.copytree(*args, **kwargs)
        local_copies.shutil = types.SimpleNamespace(**{**vars(shutil), "copytree": copytree})
    from graph_planner.cli import app
    sys.argv[0] = "gp"
    app()
""")


def _start(args: list[str], tmp: Path, slow_copy: bool) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    env.pop("GP_TEST_REGISTRY", None)
    return subprocess.Popen([sys.executable, "-c", LAUNCHER, "slow-copy" if slow_copy else "plain", *args], cwd=ROOT,
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            restore_signals=True, start_new_session=True)


def _copies(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("gp-*"))


def _wait_for(proc: subprocess.Popen[str], ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"gp ended (rc {proc.returncode}) before {what}: {err[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"gp did not reach {what} in {START_TIMEOUT_S:g}s")
        time.sleep(0.05)


def signal_and_check(args: list[str], tmp: Path, point: str, signum: int = signal.SIGTERM) -> float:
    """Start gp, wait for ``point`` (``in-copy``: the copy lock held; ``sandbox``: a sandbox copy exists), signal
    it and check the exit. Returns the seconds from the signal to the exit."""
    tmp.mkdir(parents=True, exist_ok=True)
    proc = _start(args, tmp, slow_copy=point == "in-copy")
    if point == "in-copy":
        _wait_for(proc, (tmp / "in-copy").exists, "the slowed copy")
    else:
        _wait_for(proc, lambda: any("template" not in p.name for p in _copies(tmp)), "a sandbox copy")
    start = time.monotonic()
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=BOUND_S + 30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"gp {args[0]} ({point}) still running {BOUND_S + 30:g}s after {signal.Signals(signum).name}: "
                    f"{err[-3000:]}")
    took = time.monotonic() - start
    expected = 128 + signum
    assert proc.returncode == expected, f"rc {proc.returncode}, stderr: {err[-3000:]}"
    assert took <= BOUND_S, f"took {took:.1f}s"
    assert "Traceback" not in err, err[-8000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"gp {args[0]}: terminated by {signal.Signals(signum).name}; sandboxes removed"), last
    assert _copies(tmp) == [], "sandbox copies left behind"
    return took


@pytest.fixture(scope="module")
def prepared(bundled_samples) -> Path:
    return bundled_samples


@pytest.fixture(scope="module")
def predictions(prepared, tmp_path_factory) -> Path:
    rows = [json.loads(line) for line in (prepared / "swebench" / "test.jsonl").read_text().splitlines()]
    path = tmp_path_factory.mktemp("preds") / "preds.jsonl"
    path.write_text("".join(json.dumps({"instance_id": r["task_id"], "model_name_or_path": "gold",
                                        "model_patch": r["gold_patch"]}) + "\n" for r in rows))
    return path


def _eval(tmp: Path, prepared: Path, *extra: str) -> list[str]:
    return ["eval", "-c", str(LOCAL_DEBUG_CONFIG), "--dataset", str(prepared / "swebench" / "test.jsonl"),
            "--limit", "4", "--run-name", "sig", "--output-dir", str(tmp / "out"),
            "--set", "backends.planner_backend=rule", "--set", "backends.cgm_backend=gold",
            "--set", f"paths.cache_dir={tmp / 'cache'}", *extra]


def _train(tmp: Path, prepared: Path, agents: int, cache: Path) -> list[str]:
    return ["train", "-c", str(LOCAL_DEBUG_CONFIG), "--set", f"logging.output_dir={tmp / 'out'}",
            "--set", f"paths.dataset_train={prepared / 'r2e_gym' / 'train.jsonl'}",
            "--set", f"paths.dataset_val={prepared / 'r2e_gym' / 'val.jsonl'}",
            "--set", f"paths.cache_dir={cache}", "--set", f"parallel.parallel_agents={agents}",
            "--set", "training.total_steps=50", "--run-name", f"sig{agents}"]


def test_every_command_ends_within_the_bound_on_sigterm_and_sigint(tmp_path, prepared, predictions,
                                                                     shared_model_cache):
    grade = ["grade", "--dataset", str(prepared / "swebench" / "test.jsonl"), "--predictions", str(predictions),
             "--sandbox", "local", "--report", str(tmp_path / "grade.json")]
    cases = [
        ("grade-in-copy", grade, "in-copy", signal.SIGTERM),
        ("grade-sandbox", grade, "sandbox", signal.SIGTERM),
        ("grade-sigint-in-copy", grade, "in-copy", signal.SIGINT),
        ("validate-in-copy", ["validate-tasks", str(prepared / "swebench" / "test.jsonl"), "--sandbox", "local",
                              "--report", str(tmp_path / "validate.json")], "in-copy", signal.SIGTERM),
        ("eval-in-copy", _eval(tmp_path / "e1", prepared), "in-copy", signal.SIGTERM),
        ("eval-sandbox", _eval(tmp_path / "e2", prepared), "sandbox", signal.SIGTERM),
        ("train-1-in-copy", _train(tmp_path / "t1", prepared, 1, shared_model_cache), "in-copy", signal.SIGTERM),
        ("train-2-sandbox", _train(tmp_path / "t2", prepared, 2, shared_model_cache), "sandbox", signal.SIGTERM),
    ]
    timings = {}
    for name, args, point, signum in cases:
        timings[name] = signal_and_check(args, tmp_path / name, point, signum)
    print("seconds from signal to exit:", {k: round(v, 2) for k, v in timings.items()})
