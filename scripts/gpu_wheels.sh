#!/usr/bin/env bash
# Fill DEST (default .whl/) with the wheels that scripts/gpu_check.sh needs on a lent GPU machine, which has no
# network: the project's imports for `gp data prepare` + `gp train` (local backend) + benchmarks/gpu_heartbeat.py that
# its image lacks (see docs/training.md, "GPU check"). Versions are requirements/lock.txt's. The image's own torch,
# transformers, tokenizers, numpy, pyarrow, pandas, ... are used as they are; Ray is not carried (76 MiB): the check
# puts a stub on the path, since the local backend only imports verl's core_algos, whose package imports ray.
#
#   bash scripts/gpu_wheels.sh                    # cp312 (the device's python3), into .whl/
#   PYV=3.11 DEST=/tmp/whl311 bash scripts/gpu_wheels.sh   # the same set for a local simulation on 3.11
set -euo pipefail
PYV=${PYV:-3.12}
DEST=${DEST:-.whl}
mkdir -p "$DEST"
lock() { grep -iE "^$1==" requirements/lock.txt | head -1; }
# pure-Python and compiled (cp$PYV manylinux) wheels, pinned by the lock
PKGS=(pydantic pydantic_core annotated-types typing-inspection typer
      verl tensordict pyvers orjson omegaconf codetiming
      tree-sitter tree-sitter-python unidiff docker
      datasets dill multiprocess)
specs=()
for p in "${PKGS[@]}"; do
  s=$(lock "$p"); [ -n "$s" ] || { echo "not in the lock: $p" >&2; exit 1; }
  specs+=("$s")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$DEST" "${specs[@]}"
# omegaconf's antlr4 runtime is published as an sdist only: build its (pure-Python) wheel here
python3 -m pip wheel -q --no-deps -w "$DEST" "$(lock antlr4-python3-runtime)"
du -ch "$DEST"/*.whl | tail -1
