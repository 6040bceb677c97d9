#!/usr/bin/env bash
# Fill DEST (default .whl/) with the wheels that scripts/gpu_check.sh needs on a lent GPU machine, which has no
# network: the project's imports for `gp data prepare` + `gp train` (local backend) + benchmarks/gpu_heartbeat.py that
# its image lacks (see docs/training.md, "GPU check"). Versions are requirements/lock.txt's. The image's own torch,
# transformers, tokenizers, numpy, pyarrow, pandas, ... are used as they are; Ray is not carried (76 MiB): the check
# puts a stub on the path, since the local backend only imports verl's core_algos, whose package imports ray.
#
# VERL=1 adds what `bash scripts/gpu_check.sh verl` needs (the verl job on the GPU): Ray itself, repacked without
# its Java jar (ray/jars/ray_dist.jar, 32 MB, Java workers only), and the modules the job's processes import that
# the image lacks (hydra, torchdata, accelerate, peft, aiohttp, fastapi/uvicorn, Ray's opentelemetry and Google
# API packages, ...: the list below is what `import` of verl's main_ppo, workers, agent loop and the project's hf
# rollout loads here, minus the image's own packages). Not measured yet: whether it all stays under the device
# tool's 64 MiB (Ray ~47 MB repacked + this project's ~7 MiB + the rest); the script prints the total.
#
#   bash scripts/gpu_wheels.sh                    # cp312 (the device's python3), into .whl/
#   VERL=1 bash scripts/gpu_wheels.sh             # ... plus Ray and verl's runtime imports
#   PYV=3.11 DEST=/tmp/whl311 bash scripts/gpu_wheels.sh   # the same set for a local simulation on 3.11
set -euo pipefail
PYV=${PYV:-3.12}
DEST=${DEST:-.whl}
VERL=${VERL:-0}
mkdir -p "$DEST"
lock() { grep -iE "^$1==" requirements/lock.txt | head -1; }
# pure-Python and compiled (cp$PYV manylinux) wheels, pinned by the lock
PKGS=(pydantic pydantic_core annotated-types typing-inspection typer
      verl tensordict pyvers orjson omegaconf codetiming
      tree-sitter tree-sitter-python unidiff docker
      datasets dill multiprocess)
if [ "$VERL" = 1 ]; then
  PKGS+=(ray hydra-core torchdata accelerate peft jsonschema jsonschema-specifications referencing rpds-py attrs
         msgpack protobuf click aiohttp aiosignal aiohappyeyeballs frozenlist multidict yarl propcache fastapi
         starlette uvicorn h11 anyio sniffio watchfiles colorful opentelemetry-api opentelemetry-sdk
         opentelemetry-proto opentelemetry-exporter-prometheus opentelemetry-semantic-conventions
         opentelemetry-exporter-otlp-proto-http opentelemetry-exporter-otlp-proto-common
         opentelemetry-exporter-http-transport googleapis-common-protos google-api-core google-auth cachetools
         pydantic-extra-types rich pygments psutil xxhash cloudpickle pylatexenc annotated-doc nvidia-ml-py)
fi
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
if [ "$VERL" = 1 ]; then
  # Ray without ray/jars/ (Java workers only): the same wheel, its RECORD lines for the jar dropped
  for whl in "$DEST"/ray-*.whl; do
    python3 - "$whl" <<'PY'
import sys, zipfile, os
src = sys.argv[1]
tmp = src + ".tmp"
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
    for item in zin.infolist():
        if item.filename.startswith("ray/jars/"):
            continue
        data = zin.read(item.filename)
        if item.filename.endswith(".dist-info/RECORD"):
            data = b"".join(l for l in data.splitlines(keepends=True) if not l.startswith(b"ray/jars/"))
        zout.writestr(item, data)
os.replace(tmp, src)
PY
  done
fi
du -ch "$DEST"/*.whl | tail -1
