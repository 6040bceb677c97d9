"""Seed key names that moved to the section they belong to; both spellings load, the new one is what is written.

The seeds (and configs/experiments/*.yaml) put image prepull settings and ROLL env-group sizing under ``env``;
they live in ``images`` and ``training`` now. A YAML file, a ``--set`` item or a dict passed to
``RunConfig.model_validate`` may use either name; giving both with different values is an error naming both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: seed dotted key -> where the value lives now.
SEED_KEY_ALIASES: dict[str, str] = {
    "env.docker_manifest": "images.manifest",
    "env.prepull_containers": "images.prepull",
    "env.prepull_max_workers": "images.prepull_max_workers",
    "env.prepull_retries": "images.prepull_retries",
    "env.prepull_delay": "images.prepull_delay",
    "env.prepull_timeout": "images.prepull_timeout",
    "env.env_groups": "training.env_groups",
    "env.max_traj_per_env": "training.max_traj_per_env",
}


def canonical_key(dotted: str) -> str:
    """The current name of a dotted config key (a seed alias is translated, any other key returned as is)."""
    return SEED_KEY_ALIASES.get(dotted, dotted)


def move_seed_keys(tree: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a config tree with every seed-named key moved to its current place."""
    out = dict(tree)
    for old, new in SEED_KEY_ALIASES.items():
        old_section, old_key = old.split(".")
        new_section, new_key = new.split(".")
        section = out.get(old_section)
        if not isinstance(section, Mapping) or old_key not in section:
            continue
        section = dict(section)
        value = section.pop(old_key)
        out[old_section] = section
        target = out.get(new_section)
        if target is None:
            target = {}
        elif not isinstance(target, Mapping):  # a section object: the values it was given
            target = target.model_dump(exclude_unset=True)
        target = dict(target)
        if new_key in target and target[new_key] != value:
            raise ValueError(f"{old} (the seed's name) and {new} are both set, to {value!r} and "
                             f"{target[new_key]!r}: keep one")
        target[new_key] = value
        out[new_section] = target
    return out
