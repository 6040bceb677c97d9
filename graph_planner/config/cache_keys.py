"""Which run-config keys (and which files they name) a cached step depends on, derived from the declarations on
each config section (``affects`` / ``field_affects`` / ``file_fields`` in :mod:`graph_planner.config.schema`).

The Prefect tasks key their caches on exactly these values (``tasks.caching.ConfigKeys.for_stage``), so a new
config field changes the right cached results as soon as it is declared, and an undeclared one fails
:func:`undeclared_fields` (tests/test_config_cache_keys.py) instead of being silently left out of every key.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from graph_planner.config.schema import RunConfig, Section, Stage


@dataclass(frozen=True)
class StageKeys:
    """Dotted config keys whose values a stage reads, and the subset naming local files whose bytes count."""

    keys: tuple[str, ...]
    files: tuple[str, ...]


def _section_class(annotation: object) -> type[Section] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, Section) else None


def _declared(model: type[Section], name: str) -> frozenset[Stage] | None:
    """The stages declared for field ``name`` of ``model``: its own entry, else the section's (None = neither)."""
    if name in model.field_affects:
        return model.field_affects[name]
    return model.affects


def walk_fields(model: type[Section] = RunConfig,
                prefix: str = "") -> Iterator[tuple[str, frozenset[Stage] | None, bool]]:
    """``(dotted key, declared stages or None, names a file)`` of every leaf field (sections are walked)."""
    for name, info in model.model_fields.items():
        dotted = f"{prefix}{name}"
        nested = _section_class(info.annotation)
        if nested is not None:
            yield from walk_fields(nested, f"{dotted}.")
            continue
        yield dotted, _declared(model, name), name in model.file_fields


def undeclared_fields() -> list[str]:
    """Dotted keys of fields no section declaration covers (must be empty)."""
    return [dotted for dotted, stages, _ in walk_fields() if stages is None]


def stage_keys(stage: Stage) -> StageKeys:
    """The keys (and file keys) a cached ``stage`` must be keyed on."""
    keys, files = [], []
    for dotted, stages, names_file in walk_fields():
        if stages and stage in stages:
            keys.append(dotted)
            if names_file:
                files.append(dotted)
    return StageKeys(tuple(keys), tuple(files))
