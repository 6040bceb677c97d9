"""Seed 000 section 7: ``python scripts/eval_graphplanner_rllm.py ...`` = ``gp eval ...``."""

import sys

from seed_cli import TRAIN_FLAGS, run

if __name__ == "__main__":
    sys.exit(run(["eval"], sys.argv[1:], TRAIN_FLAGS))
