"""One rule for what counts as a metric value: a number, a bool, or a numpy / torch 0-d value, as a float."""

from __future__ import annotations

from typing import Any


def scalar(value: Any) -> float | None:
    """``value`` as a float, or None when it is not a scalar number (a list, an array, text)."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:  # numpy scalar, 0-d tensor
        value = value.item()
    if isinstance(value, (bool, int, float)):
        return float(value)
    return None
