#!/usr/bin/env bash
# Refresh requirements/lock.txt: the one step that resolves dependencies.
#
# Resolves pyproject.toml's `graph-planner[train,dev]` into a scratch venv (CPU torch first, so the resolver never
# picks the multi-GB CUDA build), then freezes exactly what got installed. Commit the new lock together with the
# pyproject.toml change that needed it; `make venv` / `make test` / `make demo` install from the lock without
# resolving. tests/test_lock.py fails when pyproject.toml asks for something the lock does not satisfy.
#
# Usage: bash scripts/lock.sh            (or: make lock)
# Env:   PYTHON (default python3.11)   TORCH (default: the torch pin of the current lock, else torch==2.13.0)
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCK="$REPO_ROOT/requirements/lock.txt"
PYTHON="${PYTHON:-python3.11}"
TORCH="${TORCH:-$(grep -E '^torch==' "$LOCK" 2>/dev/null || echo 'torch==2.13.0')}"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

"$PYTHON" -m venv "$SCRATCH/venv"
PIP="$SCRATCH/venv/bin/pip"
"$PIP" install -q --disable-pip-version-check "$TORCH"
"$PIP" install -q --disable-pip-version-check -e "$REPO_ROOT[train,dev]"
"$PIP" check
{
  echo "# Locked dependency set of graph-planner[train,dev] on CPython 3.11 / linux x86_64, CPU torch."
  echo "# Installed by the Makefile without resolving (uv pip install --no-deps). Refresh: bash scripts/lock.sh"
  # --all keeps setuptools (torch needs a newer one than a fresh venv has); pip is the venv's own
  "$PIP" freeze --all --exclude-editable --disable-pip-version-check | grep -vE '^pip=='
} >"$LOCK.new"
mv "$LOCK.new" "$LOCK"
echo "lock: $(grep -cE '^[A-Za-z0-9]' "$LOCK") packages pinned in ${LOCK#"$REPO_ROOT"/}"
