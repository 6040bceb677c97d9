"""Seed 000 section 3 / seed 002: ``python scripts/train_graphplanner_rllm.py ...`` = ``gp train ...``."""

import sys

from seed_cli import TRAIN_FLAGS, run

if __name__ == "__main__":
    sys.exit(run(["train"], sys.argv[1:], TRAIN_FLAGS))
