"""Seed 000 section 0: ``python scripts/prepare_training_datasets.py --r2e-dataset R2E-Gym/R2E-Gym-Lite
--r2e-output datasets/r2e_gym`` = ``gp data prepare --skip-swebench ...`` (+ ``gp images prepull`` with
``--prepull-containers``)."""

import sys

from seed_cli import prepare_then_prepull

if __name__ == "__main__":
    sys.exit(prepare_then_prepull(sys.argv[1:], default_skip="--skip-swebench"))
