#!/usr/bin/env bash
# Run the Graph Planner deployments locally: a Prefect server, the process work pool, `prefect deploy --all`
# (deployments/prefect.yaml) and a process worker; then print the UI URL and the commands that trigger runs.
#
#   scripts/prefect-local.sh start [--port 4200]   # idempotent: reuses a server/worker that is already up
#   scripts/prefect-local.sh stop                  # stops only what `start` started (by the recorded pids)
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

stop_one() {  # SIGTERM the process group we started, SIGKILL what is left after 15 s
  local name="$1" pid
  alive "$name" || { rm -f "$STATE/$name.pid"; return 0; }
  pid="$(cat "$STATE/$name.pid")"
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$STATE/$name.pid"
  echo "stopped $name (pid $pid)"
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
Stop: scripts/prefect-local.sh stop
EOF
}

case "$command" in
  start) start ;;
  stop) stop_one worker; stop_one server ;;
  status)
    for name in server worker; do
      if alive "$name"; then echo "$name: running (pid $(cat "$STATE/$name.pid"))"; else echo "$name: not running"; fi
    done
    healthy && echo "api: $PREFECT_API_URL healthy" || echo "api: $PREFECT_API_URL not answering" ;;
  *) echo "usage: $0 start|stop|status [--port PORT]" >&2; exit 2 ;;
esac
