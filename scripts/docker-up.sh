#!/usr/bin/env bash
# Bring up a real Docker engine, a local registry and the base image for the docker sandbox and its tests.
#
# Idempotent and fast when everything is already up. If a Docker engine already answers (DOCKER_HOST or the
# default socket) it is used as is; otherwise, as root, this script installs Debian's docker.io / debootstrap /
# docker-registry (and bubblewrap, the local sandbox's isolation wrapper) when missing and starts its own dockerd (no iptables, no bridge, its own socket and data root;
# storage overlay2 when the kernel supports it — container start ~1 s instead of ~5-10 s on vfs — else vfs).
# Everything it starts is recorded by pid under .cache/docker/ in the repo, so scripts/docker-down.sh stops only
# that. The base image graph-planner/base:bookworm is made with debootstrap + `docker import` (nothing is pulled).
#
# State (.cache/docker/, gitignored):
#   dockerd.pid, docker.sock, data-root/   the engine this script started (absent when an engine already answered)
#   storage-driver                         overlay2 or vfs, whichever dockerd started with
#   registry.pid, registry.port, registry/ a docker registry on 127.0.0.1:PORT (no TLS needed on loopback)
#   rootfs-bookworm-RECIPE.tar             debootstrap rootfs cache, so a re-import after docker-down takes seconds
#   env.sh                                 the export lines below, for `source .cache/docker/env.sh`
#
# Environment variables it prints (and writes to env.sh):
#   DOCKER_HOST       Docker's own standard variable: where docker-py / the docker CLI / the tests find the engine.
#   GP_TEST_REGISTRY  test-only fixture input: host:port of the local registry that the prepull tests push to.
#
# Exit codes: 0 = engine, registry and base image ready; 1 = no engine answers and we are not root (tests skip),
# or a step failed (the message says which and where its log is).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$REPO_ROOT/.cache/docker"
BASE_IMAGE="graph-planner/base:bookworm"
SUITE="bookworm"
# python-is-python3: task test commands say `python -m pytest`, as in SWE-bench / R2E images.
INCLUDE="python3,python3-pytest,git,patch,python-is-python3"
RECIPE="$(echo -n "debootstrap --variant=minbase --include=$INCLUDE $SUITE" | md5sum | cut -c1-12)"
ROOTFS_TAR="$STATE/rootfs-$SUITE-$RECIPE.tar"

log() { echo "docker-up: $*" >&2; }
die() { echo "docker-up: ERROR: $*" >&2; exit 1; }
pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

mkdir -p "$STATE"
STATE="$(cd "$STATE" && pwd)"

engine_answers() { timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

install_packages() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v docker-registry >/dev/null || missing+=(docker-registry)
  command -v docker >/dev/null || missing+=(docker.io)
  # not Docker, but the same root-only set-up step: the local sandbox's isolation wrapper (sandbox/isolation.py)
  command -v bwrap >/dev/null || missing+=(bubblewrap)
  ((${#missing[@]} == 0)) && return 0
  [[ $EUID -eq 0 ]] || die "missing ${missing[*]} and not root: install them (apt-get install ${missing[*]})"
  log "installing ${missing[*]} (apt-get)"
  # the package must not start a system dockerd (we start our own below): deny service starts meanwhile
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  local rc=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } \
    >"$STATE/apt.log" 2>&1 || rc=$?
  ((made_policy)) && rm -f "$policy"
  ((rc == 0)) || die "apt-get install ${missing[*]} failed, see $STATE/apt.log"
}

start_dockerd() {
  local sock="$STATE/docker.sock"
  # unix socket paths are limited to 108 bytes: fall back to /tmp for deep checkouts.
  if ((${#sock} > 100)); then sock="/tmp/gp-docker-$(echo -n "$STATE" | md5sum | cut -c1-8).sock"; fi
  local exec_root="/tmp/gp-dockerd-$(echo -n "$STATE" | md5sum | cut -c1-8)"
  export DOCKER_HOST="unix://$sock"
  if pid_alive "$STATE/dockerd.pid" && engine_answers; then
    log "dockerd already running (pid $(cat "$STATE/dockerd.pid"))"
    return 0
  fi
  [[ $EUID -eq 0 ]] || die "no Docker engine answers and we are not root: start one and set DOCKER_HOST"
  mkdir -p "$STATE/data-root" "$exec_root"
  local driver
  for driver in overlay2 vfs; do
    if [[ $driver == overlay2 ]] && ! grep -qw overlay /proc/filesystems; then continue; fi
    rm -f "$sock"
    log "starting dockerd ($driver) on $sock (log $STATE/dockerd.log)"
    nohup dockerd --data-root "$STATE/data-root" --exec-root "$exec_root" --pidfile "$exec_root/dockerd.pid" \
      --storage-driver="$driver" --iptables=false --ip-masq=false --bridge=none -H "unix://$sock" \
      >"$STATE/dockerd.log" 2>&1 </dev/null &
    echo $! >"$STATE/dockerd.pid"
    echo "$driver" >"$STATE/storage-driver"
    if wait_for_engine; then return 0; fi
    log "dockerd did not come up with $driver storage (see $STATE/dockerd.log)"
    kill "$(cat "$STATE/dockerd.pid")" 2>/dev/null || true
    sleep 1
  done
  die "dockerd did not start on $sock with overlay2 or vfs storage, see $STATE/dockerd.log"
}

wait_for_engine() {
  for _ in $(seq 1 120); do
    engine_answers && return 0
    pid_alive "$STATE/dockerd.pid" || return 1
    sleep 0.5
  done
  return 1
}

http_ok() { python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" >/dev/null 2>&1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_registry() {
  if pid_alive "$STATE/registry.pid" && [[ -f "$STATE/registry.port" ]] \
    && http_ok "http://127.0.0.1:$(cat "$STATE/registry.port")/v2/"; then
    log "registry already running on 127.0.0.1:$(cat "$STATE/registry.port")"
    return 0
  fi
  local port=""
  # keep the port of an earlier start (manifests and pushed image names embed 127.0.0.1:PORT); a new one only
  # when there was none or it is taken by something else now
  if [[ -f "$STATE/registry.port" ]]; then
    port="$(cat "$STATE/registry.port")"
    if ! python3 -c 'import socket, sys; s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" \
        2>/dev/null; then
      log "registry port $port (from $STATE/registry.port) is taken by another process: choosing a new one"
      port=""
    fi
  fi
  [[ -n "$port" ]] || port="$(free_port)"
  mkdir -p "$STATE/registry"
  cat >"$STATE/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $STATE/registry
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
EOF
  log "starting registry on 127.0.0.1:$port (log $STATE/registry.log)"
  nohup docker-registry serve "$STATE/registry.yml" >"$STATE/registry.log" 2>&1 </dev/null &
  echo $! >"$STATE/registry.pid"
  echo "$port" >"$STATE/registry.port"
  for _ in $(seq 1 60); do
    http_ok "http://127.0.0.1:$port/v2/" && return 0
    pid_alive "$STATE/registry.pid" || die "docker-registry exited, see $STATE/registry.log"
    sleep 0.25
  done
  die "registry did not answer on 127.0.0.1:$port, see $STATE/registry.log"
}

build_base_image() {
  local label
  label="$(docker image inspect -f '{{index .Config.Labels "graph-planner.base-recipe"}}' "$BASE_IMAGE" 2>/dev/null || true)"
  if [[ "$label" == "$RECIPE" ]]; then
    log "$BASE_IMAGE present"
    return 0
  fi
  if [[ ! -s "$ROOTFS_TAR" ]]; then
    [[ $EUID -eq 0 ]] || die "$BASE_IMAGE missing and debootstrap needs root"
    local rootfs="$STATE/rootfs-$SUITE.tmp"
    rm -rf "$rootfs"
    log "debootstrap --variant=minbase $SUITE (about a minute, log $STATE/debootstrap.log)"
    debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$rootfs" >"$STATE/debootstrap.log" 2>&1 \
      || die "debootstrap failed, see $STATE/debootstrap.log"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    rm -f "$STATE"/rootfs-"$SUITE"-*.tar  # caches of an older recipe
    tar --numeric-owner -C "$rootfs" -cf "$ROOTFS_TAR.part" . && mv "$ROOTFS_TAR.part" "$ROOTFS_TAR"
    rm -rf "$rootfs"
  fi
  log "docker import $ROOTFS_TAR -> $BASE_IMAGE"
  docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    --change "LABEL graph-planner.base-recipe=$RECIPE" "$ROOTFS_TAR" "$BASE_IMAGE" >/dev/null
}

if engine_answers; then
  log "using the engine at ${DOCKER_HOST:-the default socket}"
  { command -v docker-registry >/dev/null && command -v bwrap >/dev/null; } || install_packages
else
  install_packages
  start_dockerd
fi
start_registry
build_base_image

{
  echo "export DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}"
  echo "export GP_TEST_REGISTRY=127.0.0.1:$(cat "$STATE/registry.port")"
} >"$STATE/env.sh"
cat "$STATE/env.sh"
