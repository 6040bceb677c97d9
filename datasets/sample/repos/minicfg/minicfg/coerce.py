"""Conversions from configuration strings to Python values."""

import re

from minicfg.errors import CoercionError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_DURATION = re.compile(r"(?P<number>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h|d)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def to_bool(value):
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise CoercionError(f"not a boolean: {value!r} (use one of {sorted(_TRUE | _FALSE)})")


def to_int(value):
    try:
        return int(value.strip().replace("_", ""), 0)
    except ValueError:
        raise CoercionError(f"not an integer: {value!r}") from None


def to_float(value):
    try:
        return float(value.strip())
    except ValueError:
        raise CoercionError(f"not a number: {value!r}") from None


def to_list(value, sep=","):
    """Split on ``sep`` or newlines, dropping empty items: ``"a, b,\\nc"`` -> ``["a", "b", "c"]``."""
    items = []
    for line in value.splitlines():
        items.extend(item.strip() for item in line.split(sep))
    return [item for item in items if item]


def to_duration(value):
    """Seconds in a duration such as ``"90"``, ``"1m30s"``, ``"250ms"`` or ``"2h"``."""
    text = value.strip().replace(" ", "")
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    position = 0
    total = 0.0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            break
        total += float(match.group("number")) * _SECONDS[match.group("unit")]
        position = match.end()
    if position != len(text) or not text:
        raise CoercionError(f"not a duration: {value!r} (examples: 90, 1m30s, 250ms)")
    return total
