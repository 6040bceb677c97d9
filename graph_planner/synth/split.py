"""Train / val / test by code location: every task of one location (a function or class of one repository) lands
in the same split, so a model evaluated on val or test has never trained on a bug in that code.

Locations are ordered by a hash of (seed, location) and cut by the requested fractions; with three or more
locations val and test each get at least one. The same locations and seed always give the same split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def split_by_location(locations: Iterable[str], seed: int, val_frac: float, test_frac: float) -> dict[str, str]:
    """location -> "train" | "val" | "test"."""
    ordered = sorted(set(locations), key=lambda loc: hashlib.sha1(f"{seed}\0{loc}".encode()).hexdigest())
    n = len(ordered)
    n_test = round(n * test_frac)
    n_val = round(n * val_frac)
    if n >= 3:
        n_test = max(n_test, 1 if test_frac > 0 else 0)
        n_val = max(n_val, 1 if val_frac > 0 else 0)
    n_test = min(n_test, n)
    n_val = min(n_val, n - n_test)
    out = {}
    for i, loc in enumerate(ordered):
        out[loc] = "test" if i < n_test else "val" if i < n_test + n_val else "train"
    return out
