#!/usr/bin/env bash
# Stop what scripts/docker-up.sh started, and only that: the dockerd and registry whose pids it recorded under
# .cache/docker/. An engine that was already running before docker-up.sh is left alone. Caches (data root,
# rootfs tarball, registry storage) are kept so the next docker-up.sh takes seconds; `rm -rf .cache/docker`
# removes them.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$REPO_ROOT/.cache/docker"

stop_pid_file() {
  local name="$1" file="$STATE/$1.pid"
  [[ -f "$file" ]] || return 0
  local pid
  pid="$(cat "$file")"
  if kill -0 "$pid" 2>/dev/null; then
    echo "docker-down: stopping $name (pid $pid)" >&2
    kill -TERM "$pid"
    for _ in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "docker-down: $name (pid $pid) ignored SIGTERM for 30 s, sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$file"
}

stop_pid_file registry
stop_pid_file dockerd
rm -f "$STATE/env.sh"  # registry.port stays: the next docker-up.sh reuses the port (image names embed it)
