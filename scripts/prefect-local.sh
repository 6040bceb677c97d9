#!/usr/bin/env bash
# Run the Graph Planner deployments locally: a Prefect server, the process work pool, `prefect deploy --all`
# (deployments/prefect.yaml) and a process worker; then print the UI URL and the commands that trigger runs.
#
#   scripts/prefect-local.sh start [--port 4200]   # idempotent: reuses a server/worker that is already up
#   scripts/prefect-local.sh stop                  # stops what `start` started (recorded pids, the worker's flow
#                                                  # runs too) and marks those runs Cancelled; a few seconds
#   scripts/prefect-local.sh status
#
# Run it from the project root (flow runs execute there). State under .cache/prefect-local/ (gitignored):
#   server.pid / worker.pid, server.log / worker.log, home/ (the server's PREFECT_HOME: SQLite DB), port.
# Flow runs store their cached results in .cache/prefect/storage, the same place `make demo` uses, so a
# pipeline run from the UI reuses the steps the demo already computed.
# Prefect's own settings apply as usual (e.g. PREFECT_WORKER_QUERY_SECONDS, the worker's poll interval).
set -euo pipefail

SCRIPT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROJECT="$PWD"
[[ -f "$PROJECT/deployments/prefect.yaml" ]] || PROJECT="$SCRIPT_ROOT"
cd "$PROJECT"
BIN="${PREFECT_BIN:-$SCRIPT_ROOT/.venv/bin}"
STATE="$PROJECT/.cache/prefect-local"
POOL="graph-planner-process"
HOST="127.0.0.1"
PORT=4200

command="${1:-start}"
shift || true
while [[ $# -gt 0 ]]; do
  case "$1" in
    --port) PORT="$2"; shift 2 ;;
    *) echo "unknown option $1 (usage: $0 start|stop|status [--port PORT])" >&2; exit 2 ;;
  esac
done
[[ "$command" != "start" && -f "$STATE/port" ]] && PORT="$(cat "$STATE/port")"

export PREFECT_API_URL="http://$HOST:$PORT/api"
export PREFECT_HOME="$STATE/home"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export PREFECT_RESULTS_LOCAL_STORAGE_PATH="$PROJECT/.cache/prefect/storage"

alive() { [[ -f "$STATE/$1.pid" ]] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }
healthy() { curl -sf "$PREFECT_API_URL/health" >/dev/null 2>&1; }

descendants() {  # every process below $1 (the worker's flow-run subprocesses and theirs)
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do echo "$child"; descendants "$child"; done
}

stop_pids() {  # SIGTERM, then SIGKILL whatever is left after $1 seconds; pids follow
  local wait_s="$1" pid left; shift
  (($# == 0)) && return 0
  kill -TERM "$@" 2>/dev/null || true
  for _ in $(seq $((wait_s * 5))); do
    left=0; for pid in "$@"; do kill -0 "$pid" 2>/dev/null && left=1; done
    ((left)) || return 0
    sleep 0.2
  done
  kill -KILL "$@" 2>/dev/null || true
}

stop_one() {  # the process group we started (and every process below it), then the pid file
  local name="$1" pid
  alive "$name" || { rm -f "$STATE/$name.pid"; return 0; }
  pid="$(cat "$STATE/$name.pid")"
  local tree=($(descendants "$pid"))
  kill -TERM -- "-$pid" 2>/dev/null || true
  stop_pids 5 "$pid" "${tree[@]}"
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$STATE/$name.pid"
  echo "stopped $name (pid $pid${tree:+, and ${#tree[@]} process(es) below it})"
}

# Runs the worker was executing end with it: mark them Cancelled (forced, so the deployment's concurrency slot is
# released; a run left "Running" would hold it and park the next run in AwaitingConcurrencySlot).
cancel_inflight_runs() {
  healthy || return 0
  "$BIN/python" - "$PREFECT_API_URL" "$POOL" <<'PY'
import sys, httpx
api, pool = sys.argv[1], sys.argv[2]
query = {"work_pools": {"name": {"any_": [pool]}},
         "flow_runs": {"state": {"type": {"any_": ["RUNNING", "PENDING", "CANCELLING"]}}}}
runs = httpx.post(f"{api}/flow_runs/filter", json=query, timeout=10).json()
for run in runs:
    state = {"type": "CANCELLED", "name": "Cancelled",
             "message": "stopped by scripts/prefect-local.sh stop: its worker and flow process were ended"}
    httpx.post(f"{api}/flow_runs/{run['id']}/set_state", json={"state": state, "force": True}, timeout=10)
    print(f"cancelled flow run {run['name']} ({run['id']})")
PY
}

start() {
  mkdir -p "$STATE" "$PREFECT_HOME" "$PREFECT_RESULTS_LOCAL_STORAGE_PATH"
  echo "$PORT" > "$STATE/port"
  if healthy; then
    echo "server: already answering at $PREFECT_API_URL"
  else
    setsid "$BIN/prefect" server start --host "$HOST" --port "$PORT" >"$STATE/server.log" 2>&1 < /dev/null &
    echo $! > "$STATE/server.pid"
    for _ in $(seq 240); do healthy && break; alive server || break; sleep 0.5; done
    healthy || { echo "server did not answer at $PREFECT_API_URL within 120 s; see $STATE/server.log" >&2; exit 1; }
    echo "server: started at $PREFECT_API_URL (pid $(cat "$STATE/server.pid"), log $STATE/server.log)"
  fi
  "$BIN/prefect" work-pool inspect "$POOL" >/dev/null 2>&1 \
    || "$BIN/prefect" work-pool create "$POOL" --type process >/dev/null
  "$BIN/prefect" --no-prompt deploy --all --prefect-file deployments/prefect.yaml >"$STATE/deploy.log" 2>&1 \
    || { echo "prefect deploy failed; see $STATE/deploy.log" >&2; exit 1; }
  echo "deployed: evaluate/nightly-eval (cron 0 2 * * * UTC), train/train, pipeline/pipeline"
  if alive worker; then
    echo "worker: already running (pid $(cat "$STATE/worker.pid"))"
  else
    setsid "$BIN/prefect" worker start --pool "$POOL" >"$STATE/worker.log" 2>&1 < /dev/null &
    echo $! > "$STATE/worker.pid"
    echo "worker: started on pool $POOL (pid $(cat "$STATE/worker.pid"), log $STATE/worker.log)"
  fi
  cat <<EOF

UI:  http://$HOST:$PORT/   (Deployments -> pipeline -> Run -> Custom run renders the typed parameter form)

Trigger runs from a shell or CI (exit code 0 = Completed, 1 = Failed):
  export PREFECT_API_URL=$PREFECT_API_URL
  $BIN/prefect deployment run 'pipeline/pipeline' --watch
  $BIN/prefect deployment run 'evaluate/nightly-eval' --param limit=2 --watch
  $BIN/prefect deployment run 'train/train' --param 'overrides=["training.total_steps=1"]' --watch
  $BIN/python -m flows.trigger pipeline/pipeline --set eval.limit=2 --watch   # checks the config first
Stop: scripts/prefect-local.sh stop
EOF
}

case "$command" in
  start) start ;;
  stop) stop_one worker; cancel_inflight_runs || true; stop_one server ;;
  status)
    for name in server worker; do
      if alive "$name"; then echo "$name: running (pid $(cat "$STATE/$name.pid"))"; else echo "$name: not running"; fi
    done
    healthy && echo "api: $PREFECT_API_URL healthy" || echo "api: $PREFECT_API_URL not answering" ;;
  *) echo "usage: $0 start|stop|status [--port PORT]" >&2; exit 2 ;;
esac
