"""The verl backend for real on CPU: `gp train -c configs/experiments/local_verl.yaml` runs verl 0.9.1's main_ppo
(GRPO, FSDP2, the project's GraphPlannerAgentLoop with PlannerEnv rewards, hf rollout) as a Ray job on a private
local Ray head, from a fresh output dir (data prepared and registered on the way).

One module-scoped run of 2 steps; the tests then check its checkpoints, its telemetry, that `gp eval` takes its HF
model dir, and that no Ray process of the job outlives `gp train`. The fault tests kill a resumed run mid-flight
and resume it again to step 3, and run a job whose FSDP worker cannot load the model. (Ray and verl start-up dominate: about 1.5-3 min per job on 2 busy cores.)

The failing job runs beside the 2-step job (started first, collected by its test), and the eval beside the kill /
resume jobs: a job's start-up is a chain of single-process ``import verl`` steps that leaves a second core idle, so
two side by side take little more than the longer one. Each test checks the processes of its own job's head (the
temp dir `gp train` names), not every head on the machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "experiments" / "local_verl.yaml"
SEED_NAMES = ("reward/mean", "episodes_per_min", "planner_parse_error_rate", "patch_success_rate",
              "patch_generated", "actor/pg_loss", "actor/grad_norm", "timing_s/step")


def job_head_pids(output: str) -> set[int]:
    """Live processes of the private head that `gp train` started (its log names the head's ``/tmp/gpray-*`` temp
    dir; the ``ray start`` process and every Ray process of the head have it in their command lines)."""
    match = re.search(r"starting a private Ray head \(pid \d+, temp dir (/tmp/gpray-[^,\s]+),", output)
    assert match, output[-3000:]
    out = set()
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(
                match.group(1) in part for part in (proc.info["cmdline"] or [])):
            out.add(proc.info["pid"])
    return out


def gp_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "VERL_PLATFORM")}, **extra}


def token_mode_env(home: Path) -> dict[str, str]:
    """As `make test` runs it (RAY_AUTH_MODE=token, no token anywhere) with a fresh HOME: the private head makes
    its own token, and nothing may land in HOME/.ray."""
    env = gp_env(HOME=str(home), RAY_AUTH_MODE="token")
    return {k: v for k, v in env.items() if k not in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}


def gp(args: list[str], cwd: Path, timeout: float = 900,
       env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "graph_planner.cli", *args], cwd=cwd, env=env or gp_env(), text=True,
                          capture_output=True, timeout=timeout)


class Background:
    """`gp <args>` started now, its stdout / stderr in ``<logs>.out`` / ``<logs>.err`` (no pipe to fill up)."""

    def __init__(self, args: list[str], logs: Path) -> None:
        self.args, self.logs = [sys.executable, "-m", "graph_planner.cli", *args], logs
        with open(f"{logs}.out", "w") as out, open(f"{logs}.err", "w") as err:
            self.proc = subprocess.Popen(self.args, cwd=ROOT, env=gp_env(), text=True, stdout=out, stderr=err)

    def finish(self, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        self.proc.wait(timeout=timeout)
        return subprocess.CompletedProcess(self.args, self.proc.returncode, Path(f"{self.logs}.out").read_text(),
                                           Path(f"{self.logs}.err").read_text())

    def stop(self) -> None:
        """Its test did not run: SIGTERM (gp train stops its job and head on it)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=180)


def train_args(work: Path, *extra: str) -> list[str]:
    return ["train", "-c", str(CONFIG), "--set", f"logging.output_dir={work / 'runs'}",
            "--set", f"data.output_dir={work / 'prepared'}", "--set", f"paths.cache_dir={ROOT / '.cache' / 'graph_planner'}",
            *extra]


@pytest.fixture(scope="module")
def failing_job(tmp_path_factory):
    """A job whose FSDP worker cannot load the model's weights (a truncated safetensors file; config and tokenizer
    load), started at once in the background: (work dir, its Background)."""
    from graph_planner.models.toy import ensure_toy_checkpoint

    work = tmp_path_factory.mktemp("brokenjob")
    broken = work / "broken_model"
    shutil.copytree(ensure_toy_checkpoint(ROOT / ".cache" / "graph_planner"), broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    job = Background(train_args(work, "--set", f"paths.planner_model={broken}", "--set", "paths.cgm_model=toy",
                                "--set", "experiment.run_name=broken"), work / "gp_train")
    yield work, job
    job.stop()


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory, failing_job):
    """`gp train ... --set training.total_steps=2` from a fresh dir: (work dir, result, run dir, seconds)."""
    work = tmp_path_factory.mktemp("verljob")
    (work / "home").mkdir()
    started = time.monotonic()
    result = gp(train_args(work, "--set", "training.total_steps=2"), cwd=ROOT, env=token_mode_env(work / "home"))
    seconds = time.monotonic() - started
    return work, result, work / "runs" / "local_verl", seconds


def test_gp_train_runs_two_real_grpo_steps_as_a_ray_job(two_steps):
    work, result, run_dir, seconds = two_steps
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "registered graph_planner_sample/train" in result.stderr  # fresh dir: data prepared on the way
    ckpt = run_dir / "checkpoints"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    hf = ckpt / "global_step_2" / "actor" / "huggingface"
    assert (hf / "model.safetensors").is_file() and (hf / "config.json").is_file()
    assert f"HF model: {hf}" in result.stdout
    assert "step:2 -" in result.stdout  # verl's own step line, followed from the job log
    # the job's env keeps verl's per-process import noise out of the log it streams (training.ray.job)
    assert "engine is not available" not in result.stdout + result.stderr
    assert "TRLExperimentalWarning" not in result.stdout + result.stderr
    curves = run_dir / "training_curves.png"  # drawn from the job's metrics.jsonl, as a local run's are
    assert curves.stat().st_size > 0 and f"curves {curves}" in result.stdout
    assert not job_head_pids(result.stderr), "Ray processes of the job's head outlived gp train"
    print(f"2-step verl job: {seconds:.0f} s wall")


def test_the_job_ran_on_a_token_auth_head_and_wrote_nothing_in_home(two_steps):
    work, result, _, _ = two_steps
    assert result.returncode == 0, result.stderr[-3000:]
    assert not (work / "home" / ".ray").exists(), list((work / "home").rglob("*"))[:20]


def test_verl_path_metrics_carry_the_seed_names_in_the_run_trackers(two_steps):
    _, result, run_dir, _ = two_steps
    assert result.returncode == 0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    by_step: dict[int, dict[str, float]] = {}
    for row in rows:
        if row.get("kind") == "metrics":
            by_step.setdefault(row["step"], {}).update(row["metrics"])
    assert {"parallel/agents", "resources/ray_cpus"} <= set(by_step[0])
    for step in (1, 2):
        missing = [name for name in SEED_NAMES if name not in by_step.get(step, {})]
        assert not missing, (step, missing, sorted(by_step.get(step, {}))[:40])
        assert by_step[step]["episodes"] == 4.0  # train_batch_size 2 x group_size 2, from the agent-loop workers
        # the env's episode summaries, through the same metric function as the local engine (loc/* included)
        assert {"loc/m_recall", "loc/episodes", "reward/frac_zero_std", "completions/clipped_ratio",
                "reward/resolved_rate", "advantage/abs_mean"} <= set(by_step[step]), sorted(by_step[step])
    assert any(key.startswith("ray/") for metrics in by_step.values() for key in metrics)
    assert list((run_dir / "tensorboard").rglob("events.out.tfevents.*"))
    episodes = [json.loads(line) for line in (run_dir / "verl" / "episodes.jsonl").read_text().splitlines()]
    assert sorted({e["step"] for e in episodes}) == [1, 2]


@pytest.fixture(scope="module")
def hf_eval(two_steps):
    """`gp eval --model-path <step 2's HF model dir>`, started in the background (it runs beside the kill / resume
    jobs, which write step 3 and read nothing it writes); collected by its test."""
    work, result, run_dir, _ = two_steps
    hf = run_dir / "checkpoints" / "global_step_2" / "actor" / "huggingface"
    job = Background(["eval", "-c", str(CONFIG), "--model-path", str(hf), "--set", f"logging.output_dir={work / 'eval'}",
                      "--set", f"data.output_dir={work / 'prepared'}", "--set", "eval.limit=1",
                      "--set", f"paths.dataset_eval={work / 'prepared' / 'swebench' / 'test.jsonl'}",
                      "--run-name", "eval_verl"], work / "gp_eval")
    yield job
    job.stop()


def test_a_killed_run_names_its_job_and_log_leaves_no_ray_process_and_resumes(two_steps, hf_eval):
    work, result, run_dir, _ = two_steps
    assert result.returncode == 0
    resume = train_args(work, "--set", "training.total_steps=3", "--set", "training.resume_from=auto")
    proc = subprocess.Popen([sys.executable, "-m", "graph_planner.cli", *resume], cwd=ROOT, env=gp_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:  # kill it once the job runs
        lines.append(line)
        if "submitted Ray job" in line or "Platform override from VERL_PLATFORM" in line:
            break
    time.sleep(5)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=180)
    output = "".join(lines) + rest
    assert proc.returncode == 143, output[-3000:]  # exit code of a SIGTERM (graph_planner.termination)
    assert "interrupted" in output and "Ray job gp-local_verl-" in output and "job-driver-gp-local_verl-" in output
    assert not job_head_pids(output), "a killed gp train left Ray processes behind"
    assert not (run_dir / "checkpoints" / "global_step_3").exists()

    again = gp(resume, cwd=ROOT)
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert (run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    assert "step:3 -" in again.stdout and "step:1 -" not in again.stdout  # resumed from step 2, not retrained


def test_gp_eval_takes_the_verl_hf_model_dir(two_steps, hf_eval):
    work, result, _, _ = two_steps
    assert result.returncode == 0
    done = hf_eval.finish(timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert list((work / "eval").rglob("report.json"))


def test_a_job_failing_in_a_worker_names_its_job_and_log_and_leaves_no_ray_process(failing_job):
    """The FSDP worker cannot load the model's weights (a truncated safetensors file; config and tokenizer load)."""
    work, job = failing_job
    done = job.finish()
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    log = work / "runs" / "broken" / "verl"
    match = re.search(r"error: Ray job (gp-broken-\S+) did not succeed; its log: (\S+)", done.stderr)
    assert match, done.stderr[-3000:]
    assert Path(match.group(2)) == log / f"job-driver-{match.group(1)}.log" and Path(match.group(2)).is_file()
    assert "safetensors" in Path(match.group(2)).read_text(errors="replace").lower()
    assert not job_head_pids(done.stderr), "a failed job left Ray processes behind"
