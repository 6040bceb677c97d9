"""The committed lock (requirements/lock.txt) is what `make venv` installs without resolving: it must pin every
package pyproject.toml asks for, at a version pyproject.toml accepts, or a fresh install silently lacks it."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")


def read_lock(path: Path = LOCK) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"{path.name}:{number}: not an exact pin 'name==version': {line!r}"
        name = canonicalize_name(match.group(1))
        assert name not in pins, f"{path.name}:{number}: {name} pinned twice"
        pins[name] = Version(match.group(2))
    return pins


def project_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in ("train", "dev"):  # what `make venv` installs
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


def test_lock_pins_every_project_requirement_at_an_accepted_version() -> None:
    pins = read_lock()
    problems = []
    for req in project_requirements():
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = canonicalize_name(req.name)
        if name not in pins:
            problems.append(f"{req} is not in the lock")
        elif not req.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{req} but the lock pins {name}=={pins[name]}")
    assert not problems, "requirements/lock.txt is stale; run `make lock` and commit it:\n" + "\n".join(problems)


def test_lock_holds_the_cpu_torch_build() -> None:
    # an unpinned or public torch pulls the multi-GB CUDA build and its nvidia-* wheels
    pins = read_lock()
    assert pins["torch"].local == "cpu"
    assert not [name for name in pins if name.startswith("nvidia-") and name != "nvidia-ml-py"]
