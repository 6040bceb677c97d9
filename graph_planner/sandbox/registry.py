"""Which class each sandbox backend name builds: the one name -> class map (the names and their aliases are
:mod:`graph_planner.config.sandbox_names`). Classes are imported when first asked for, so a backend whose
dependencies are missing (docker-py, R2E-Gym) fails only the tasks that use it, with its own message."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from graph_planner.config.sandbox_names import SandboxName, canonical_sandbox_name
from graph_planner.sandbox.base import SandboxError

if TYPE_CHECKING:
    from graph_planner.sandbox.shell import ShellSandbox

#: name -> "module:Class" of its ShellSandbox subclass; a new backend is one line here and one name in
#: ``SandboxName``.
SANDBOX_CLASSES: dict[SandboxName, str] = {
    "local": "graph_planner.sandbox.local:LocalSandbox",
    "docker": "graph_planner.sandbox.docker:DockerSandbox",
    "r2egym": "graph_planner.sandbox.r2egym:R2EGymSandbox",
}


def sandbox_class(name: str) -> type[ShellSandbox]:
    """The class of backend ``name`` (an alias is accepted). SandboxError listing the valid names for an unknown
    one, and naming the backend when its module cannot be imported."""
    try:
        canonical = canonical_sandbox_name(name)
    except ValueError as exc:
        raise SandboxError(str(exc)) from None
    module_name, class_name = SANDBOX_CLASSES[canonical].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SandboxError(f"sandbox backend {canonical} unavailable: {exc}") from exc
    return getattr(module, class_name)
