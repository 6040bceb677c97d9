"""Seed 000 section 0: ``python scripts/prepare_swebench_validation.py --swebench-dataset
princeton-nlp/SWE-bench_Verified --swebench-output datasets/swebench`` = ``gp data prepare --skip-r2e ...``
(+ ``gp images prepull`` with ``--prepull-containers``)."""

import sys

from seed_cli import prepare_then_prepull

if __name__ == "__main__":
    sys.exit(prepare_then_prepull(sys.argv[1:], default_skip="--skip-r2e"))
