#!/usr/bin/env bash
# The GPU check (docs/training.md, "GPU check"): on a machine with one NVIDIA GPU and no network, run
#   1. benchmarks/gpu_heartbeat.py --load: NVML sees the GPU, its utilisation is higher under a matmul load;
#   2. `gp data prepare` on the bundled sample (local_debug.yaml; the R2E-Gym split only: training reads no other);
#   3. `gp train` with the local backend on the toy model, 2 steps, once per training.precision (fp32, bf16, fp16),
#      in-process (scripts/gpu_check.py), so that it can report the trainer's device and the CUDA memory it took;
#   4. the tests whose path changes with a GPU: local trainer (cuda, bf16 autocast, fp16 allowed), GRPO, heartbeat.
# The machine's python3 is used as it is (torch, transformers, tokenizers, numpy, pyarrow, pytest, ...); the
# project's other imports travel as wheels in .whl/ (made here by scripts/gpu_wheels.sh) and are installed into a
# private --target dir. Ray (76 MiB) does not travel: where it is missing, a stub package stands in for it, since
# the local backend imports only verl's core_algos, and verl's package imports ray at its top without calling it.
# The local sandbox keeps its default isolation (sandbox.local_isolation=auto): without a usable bwrap it falls
# back to `unshare -n`, or to none, with a warning in the log.
#
# Results in $OUT (the device tool's output folder; default runs/gpu-check), 6 files: summary.json (every step's
# rc and seconds, and what each read), gpu_check.log (all output), heartbeat.json, metrics_<precision>.jsonl.
# Every step together gets BUDGET_S seconds; the exit status is the number of failed steps.
#
# `verl` runs the verl check instead (docs/training.md, "GPU check"): the verl job's entrypoint
# (graph_planner.training.verl.entry, what the Ray job runs; verl's main_ppo starts Ray here with ray.init, no Ray
# Jobs dashboard) for 2 steps on configs/experiments/local_verl.yaml with the hf rollout on the GPU and the
# project's agent loop, NVML sampled meanwhile (scripts/gpu_check.py verl), then the hf rollout server's test on
# the GPU. It needs Ray and verl's runtime imports in .whl/ (VERL=1 bash scripts/gpu_wheels.sh). Results:
# summary_verl.json, gpu_check_verl.log, verl_check.json (step times, GPU memory per process, verl's metrics).
#
#   bash scripts/gpu_check.sh          # the local backend's GPU paths
#   bash scripts/gpu_check.sh verl     # the verl job, 2 steps
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-local}
case "$MODE" in
  local) CONFIG=configs/experiments/local_debug.yaml; BUDGET_S=400; SUFFIX="" ;;
  verl) CONFIG=configs/experiments/local_verl.yaml; BUDGET_S=480; SUFFIX="_verl" ;;
  *) echo "usage: bash scripts/gpu_check.sh [local|verl]" >&2; exit 2 ;;
esac
# BUDGET_S: every step together; the device run's timeout_s should leave a minute above it
OUT=${OUT:-$PWD/runs/gpu-check}
WORK=/tmp/gpu-check
SITE=$WORK/site
rm -rf "$WORK" runs/gpu-check-train-* runs/gpu-check-verl  # a warm machine keeps ignored paths: no resume
mkdir -p "$OUT" "$WORK"
exec > >(tee "$OUT/gpu_check$SUFFIX.log") 2>&1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
FAILED=0
STEPS=$WORK/steps.jsonl  # one line per step: rc, seconds
FACTS=$WORK/facts.jsonl  # one line per step that reads something (scripts/gpu_check.py)
: >"$STEPS"
: >"$FACTS"

# step NAME LIMIT_S CMD...: run CMD under min(LIMIT_S, what is left of BUDGET_S), record its rc and seconds, and
# rewrite summary.json, so that a run stopped by the device's own limit still brings back what it did
step() {
  local name=$1 limit=$2 t0=$SECONDS rc left
  shift 2
  left=$((BUDGET_S - SECONDS))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 0 ]; then
    echo "=== $name: skipped, the ${BUDGET_S}s budget is spent"
    rc=124
  else
    echo "=== $name (limit ${limit}s): $*"
    timeout "$limit" "$@"
    rc=$?
  fi
  echo "=== $name: rc=$rc in $((SECONDS - t0))s"
  [ "$rc" -eq 0 ] || FAILED=$((FAILED + 1))
  printf '{"step": "%s", "rc": %d, "s": %d}\n' "$name" "$rc" "$((SECONDS - t0))" >>"$STEPS"
  python3 scripts/gpu_check.py summary "$STEPS" "$FACTS" "$OUT/summary$SUFFIX.json" "$FAILED"
}

echo "=== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
git --version
command -v bwrap || echo "bwrap: absent"
echo "cpus: $(nproc)"

if [ -d .whl ]; then
  step install 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl
else
  echo "no .whl/ here: using the packages python3 already has"
fi
export PYTHONPATH=$SITE:$PWD
if [ "$MODE" = verl ]; then
  step env 60 python3 scripts/gpu_check.py env "$FACTS"
  # every module the job's processes import, named when one is missing (no stub: this check runs Ray)
  step imports 120 python3 -c "import ray, hydra, torchdata, accelerate, peft, aiohttp, fastapi, uvicorn, pynvml
import verl.trainer.main_ppo, verl.workers.engine_workers, verl.experimental.agent_loop.agent_loop
import graph_planner.training.verl.entry, graph_planner.training.verl.agent_loop, graph_planner.training.verl.hf_rollout
print('imports ok: ray', ray.__version__)"
  step verl 420 python3 scripts/gpu_check.py verl "$CONFIG" "$FACTS" "$OUT/verl_check.json"
  step tests 90 python3 -m pytest -q -p no:cacheprovider tests/test_training_verl_cpu.py -k hf_rollout_server
  cat "$OUT/summary$SUFFIX.json"
  exit "$FAILED"
fi
if ! python3 -c "import ray" 2>/dev/null; then
  mkdir -p "$WORK/stub/ray"
  cat >"$WORK/stub/ray/__init__.py" <<'EOF'
"""Stand-in for Ray (scripts/gpu_check.sh): verl's package imports ray at its top; the local backend never calls it."""
__version__ = "0.0.0+gpu-check-stub"


class ObjectRef:  # verl.protocol annotates with ray.ObjectRef at class level
    pass


def is_initialized() -> bool:  # the heartbeat's ray/* sampler asks; no Ray runs here
    return False


def __getattr__(name: str):
    raise AttributeError(f"ray.{name}: Ray is not installed here (scripts/gpu_check.sh put this stub in its place)")
EOF
  export PYTHONPATH=$PYTHONPATH:$WORK/stub  # last: a real ray, where there is one, still wins
  echo "ray: not installed, a stub stands in"
fi

step env 60 python3 scripts/gpu_check.py env "$FACTS"
step heartbeat 60 bash -c 'python3 benchmarks/gpu_heartbeat.py --samples 10 --interval 0.5 --load >"$1"' _ \
  "$OUT/heartbeat.json"
step heartbeat_check 20 python3 scripts/gpu_check.py heartbeat "$OUT/heartbeat.json" "$FACTS"
step prepare 60 python3 -m graph_planner.cli data prepare -c "$CONFIG" --skip-swebench
for precision in fp32 bf16 fp16; do
  step "train_$precision" 90 python3 scripts/gpu_check.py train "$precision" "$CONFIG" "$FACTS"
  metrics=runs/gpu-check-train-$precision/metrics.jsonl
  if [ -f "$metrics" ]; then cp "$metrics" "$OUT/metrics_$precision.jsonl"; fi
done
# -m "not ray": those tests start a real Ray head
step tests 150 python3 -m pytest -q -p no:cacheprovider -m "not ray" tests/test_training_local.py \
  tests/test_training_grpo.py tests/test_telemetry_heartbeat.py

cat "$OUT/summary.json"
exit "$FAILED"
