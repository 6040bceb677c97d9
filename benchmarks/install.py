"""Fresh-venv install from the committed lock, as `make venv` does it, cold and warm; prints JSON.

Phases (seconds each): venv creation + the pinned uv, the CPU torch wheel (pip), the locked set (uv --no-deps),
the project itself (editable), `uv pip check`. "cold" uses an empty uv cache (every wheel downloaded from the
registry), "warm" the cache the cold run filled. Target: warm total under ~60 s on 2 cores.

    .venv/bin/python benchmarks/install.py [--runs warm|cold|both] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"
UV_VERSION = re.search(r"^UV_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)


def _timed(cmd: list[str], env_extra: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env={**os.environ, **env_extra}, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return round(time.perf_counter() - start, 2)


def install_once(workdir: Path, uv_cache: Path) -> dict[str, float]:
    workdir.mkdir(parents=True, exist_ok=True)
    venv = workdir / "venv"
    bin_ = venv / "bin"
    env = {"UV_CACHE_DIR": str(uv_cache)}
    lock_lines = LOCK.read_text().splitlines()
    torch_pin = next(line for line in lock_lines if line.startswith("torch=="))
    rest = workdir / "lock-without-torch.txt"
    rest.write_text("\n".join(line for line in lock_lines if not line.startswith("torch==")) + "\n")
    phases = {
        "venv_and_uv": _timed([sys.executable, "-m", "venv", str(venv)], env)
        + _timed([str(bin_ / "pip"), "install", "-q", "--disable-pip-version-check", "--no-compile",
                  f"uv=={UV_VERSION}"], env),
        "torch_cpu": _timed([str(bin_ / "pip"), "install", "-q", "--disable-pip-version-check", "--no-compile",
                            "--no-deps", torch_pin], env),
        "locked_set": _timed([str(bin_ / "uv"), "pip", "install", "-q", "--python", str(bin_ / "python"),
                              "--no-deps", "-r", str(rest)], env),
        "project": _timed([str(bin_ / "uv"), "pip", "install", "-q", "--python", str(bin_ / "python"),
                           "--no-deps", "-e", str(ROOT)], env),
        "check": _timed([str(bin_ / "uv"), "pip", "check", "-q", "--python", str(bin_ / "python")], env),
    }
    phases["total"] = round(sum(phases.values()), 2)
    return phases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", choices=["warm", "cold", "both"], default="both")
    args = parser.parse_args()
    packages = sum(1 for line in LOCK.read_text().splitlines() if line and not line.startswith("#"))
    result: dict[str, object] = {"locked_packages": packages, "uv": UV_VERSION}
    with tempfile.TemporaryDirectory(prefix="gp-install-") as tmp:
        cache = Path(tmp) / "uv-cache"
        if args.runs in ("cold", "both"):
            result["cold"] = install_once(Path(tmp) / "cold", cache)
            shutil.rmtree(Path(tmp) / "cold")
        if args.runs in ("warm", "both"):
            if args.runs == "warm":  # fill the cache first, untimed
                install_once(Path(tmp) / "fill", cache)
                shutil.rmtree(Path(tmp) / "fill")
            result["warm"] = install_once(Path(tmp) / "warm", cache)
    warm = result.get("warm")
    if isinstance(warm, dict):
        result["warm_within_60s"] = warm["total"] <= 60
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
