#!/usr/bin/env bash
# Run the Graph Planner deployments locally: a Prefect server, the process work pool, `prefect deploy --all`
# (deployments/prefect.yaml) and a process worker; then print the UI URL and the commands that trigger runs.
#
#   scripts/prefect-local.sh start [--port 4200] [--alert-webhook URL]
#                                                  # idempotent: reuses a server/worker that is already up;
#                                                  # --alert-webhook: a failed or crashed nightly-eval run is
#                                                  # POSTed to URL (python -m flows.alerts)
#   scripts/prefect-local.sh stop                  # cancels in-flight runs through the API (the worker ends their
#                                                  # processes; state Cancelled, concurrency slot released), then
#                                                  # stops what `start` started (recorded pids); seconds, at
#                                                  # most ~45 s more for a run that does not end when asked
#   scripts/prefect-local.sh status
#
# Run it from the project root (flow runs execute there). State under .cache/prefect-local/ (gitignored):
#   server.pid / worker.pid, server.log / worker.log, home/ (the server's PREFECT_HOME: SQLite DB), port.
# Flow runs store their cached results in .cache/prefect/storage, the same place `make demo` uses, so a
# pipeline run from the UI reuses the steps the demo already computed.
# The worker polls for runs every 2 s (PREFECT_WORKER_QUERY_SECONDS, Prefect's default 10 s), so a run triggered
# from the UI or CLI starts within ~2 s; set the variable to change it. Prefect's other settings apply as usual.
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
ALERT_WEBHOOK=""

command="${1:-start}"
shift || true
while [[ $# -gt 0 ]]; do
  case "$1" in
    --port) PORT="$2"; shift 2 ;;
    --alert-webhook) ALERT_WEBHOOK="$2"; shift 2 ;;
    *) echo "unknown option $1 (usage: $0 start|stop|status [--port PORT] [--alert-webhook URL])" >&2; exit 2 ;;
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

# In-flight runs (Pending, Running, Cancelling) of the pool are cancelled the way the UI's "Cancel" does it: state
# Cancelling, the worker ends the flow's processes and reports Cancelled, which releases the deployment's concurrency
# slot. A run still not final after CANCEL_WAIT_S (no worker, or one that cannot end it) is set Cancelled by force,
# so no run is left "Running" holding the slot and parking the next run in AwaitingConcurrencySlot. Runs that are
# only scheduled (the nightly cron) are left alone.
CANCEL_WAIT_S=45
cancel_inflight_runs() {  # $1: "request" (ask the worker) or "force" (mark whatever is left)
  healthy || return 0
  "$BIN/python" - "$PREFECT_API_URL" "$POOL" "$1" "$CANCEL_WAIT_S" <<'PY'
import sys, time, httpx
api, pool, mode, wait_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
query = {"work_pools": {"name": {"any_": [pool]}},
         "flow_runs": {"state": {"type": {"any_": ["RUNNING", "PENDING", "CANCELLING"]}}}}
why = "stopped by scripts/prefect-local.sh stop"
def inflight():
    return httpx.post(f"{api}/flow_runs/filter", json=query, timeout=10).json()
runs = inflight()
if mode == "force":
    for run in runs:
        state = {"type": "CANCELLED", "name": "Cancelled", "message": f"{why}: its worker was gone before it ended"}
        httpx.post(f"{api}/flow_runs/{run['id']}/set_state", json={"state": state, "force": True}, timeout=10)
        print(f"marked flow run {run['name']} ({run['id']}) Cancelled")
    sys.exit(0)
for run in runs:
    if run["state_type"] != "CANCELLING":
        state = {"type": "CANCELLING", "name": "Cancelling", "message": why}
        httpx.post(f"{api}/flow_runs/{run['id']}/set_state", json={"state": state}, timeout=10)
    print(f"cancelling flow run {run['name']} ({run['id']})")
deadline = time.monotonic() + wait_s
while runs and time.monotonic() < deadline:
    time.sleep(0.5)
    left = {run["id"] for run in inflight()}
    for run in [run for run in runs if run["id"] not in left]:
        print(f"cancelled flow run {run['name']} ({run['id']})")
    runs = [run for run in runs if run["id"] in left]
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
  if [[ -n "$ALERT_WEBHOOK" ]]; then
    "$BIN/python" -m flows.alerts --webhook-url "$ALERT_WEBHOOK" || { echo "alert automation failed" >&2; exit 1; }
  fi
  if alive worker; then
    echo "worker: already running (pid $(cat "$STATE/worker.pid"))"
  else
    PREFECT_WORKER_QUERY_SECONDS="${PREFECT_WORKER_QUERY_SECONDS:-2}" \
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
Alert on a failed or crashed nightly run (a Slack-style JSON POST; or start with --alert-webhook URL):
  $BIN/python -m flows.alerts --webhook-url URL
Stop: scripts/prefect-local.sh stop
EOF
}

case "$command" in
  start) start ;;
  stop) cancel_inflight_runs request || true; stop_one worker; cancel_inflight_runs force || true; stop_one server ;;
  status)
    for name in server worker; do
      if alive "$name"; then echo "$name: running (pid $(cat "$STATE/$name.pid"))"; else echo "$name: not running"; fi
    done
    healthy && echo "api: $PREFECT_API_URL healthy" || echo "api: $PREFECT_API_URL not answering" ;;
  *) echo "usage: $0 start|stop|status [--port PORT]" >&2; exit 2 ;;
esac
