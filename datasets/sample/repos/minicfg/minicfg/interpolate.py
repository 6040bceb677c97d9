"""``${...}`` references inside values.

``${key}`` is looked up in the value's own section, then in ``[DEFAULT]``; ``${section:key}`` in a named
section; ``${env:NAME}`` in the environment. Referenced values are interpolated in turn.
"""

import os
import re

from minicfg.errors import InterpolationError
from minicfg.parser import DEFAULT_SECTION, normalize_key

MAX_DEPTH = 10
_REFERENCE = re.compile(r"\$\{(?:(?P<section>[^:{}]+):)?(?P<key>[^:{}]+)\}")


def _lookup(data, ref_section, own_section, key):
    """Raw value of a reference to ``key`` written in a value of ``own_section`` (None if undefined)."""
    if ref_section is not None:
        return data.get(ref_section, {}).get(key)
    for candidate in (DEFAULT_SECTION, own_section):
        if key in data.get(candidate, {}):
            return data[candidate][key]
    return None


def interpolate(value, section, data, environ=None, depth=0):
    """Expand the references in ``value``, a value of ``section`` in ``data`` (``{section: {key: raw}}``)."""
    if depth > MAX_DEPTH:
        raise InterpolationError(f"references nested deeper than {MAX_DEPTH} levels in [{section}]: {value!r}")
    environ = os.environ if environ is None else environ

    def expand(match):
        ref_section = match.group("section")
        key = match.group("key").strip()
        if ref_section == "env":
            if key not in environ:
                raise InterpolationError(f"environment variable {key} is not set (referenced in [{section}])")
            return environ[key]
        raw = _lookup(data, ref_section, section, normalize_key(key))
        if raw is None:
            where = f"[{ref_section}]" if ref_section else f"[{section}] or [{DEFAULT_SECTION}]"
            raise InterpolationError(f"{match.group(0)} in [{section}]: no {key!r} in {where}")
        # [DEFAULT] values act as if written in the section that uses them, so their own references
        # resolve there too; a qualified reference switches to the named section.
        return interpolate(raw, ref_section or section, data, environ, depth + 1)

    return _REFERENCE.sub(expand, value)
