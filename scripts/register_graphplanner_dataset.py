"""Seed 001 section 2.3: ``python scripts/register_graphplanner_dataset.py FILE.jsonl`` = ``gp data register
FILE.jsonl --rllm-layout`` (verl parquet + rLLM's ``<split>_verl.parquet``, and rLLM's DatasetRegistry when rllm
is importable)."""

import sys

from seed_cli import run

if __name__ == "__main__":
    sys.exit(run(["data", "register", "--rllm-layout"], sys.argv[1:]))
