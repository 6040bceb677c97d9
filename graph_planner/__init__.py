"""Graph Planner: train and evaluate code-graph planner agents that repair real repositories."""

import os as _os

__version__ = "0.1.0"

# OpenMP's default wait policy spins: a torch thread waiting for its peer keeps a core busy. Graph Planner's CPU runs
# share a few cores among several busy processes (sandboxed test runs, Ray actors, a second torch process), where
# the spinning slows everything else and itself: 100 SFT steps (2 threads) beside two busy processes took 49.9 s,
# 21.3 s with PASSIVE (the same loss: waiting changes no arithmetic); idle 11.9 s -> 13.1 s, 17 % less CPU
# (2026-11-29, docs/training.md). Set before torch loads its OpenMP runtime (this package is imported first by every
# entry point); a value set by the user wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
