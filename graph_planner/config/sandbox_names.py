"""The names of the sandbox backends: one type, one alias table. They sit in the config layer because the run
config (``backends.sandbox``), the task record (``TaskRecord.backend``) and the CLI's ``--sandbox`` choices all
validate them, and those modules may not import the sandbox package above them. Which class each name builds is
:mod:`graph_planner.sandbox.registry` (a test keeps both in step)."""

from __future__ import annotations

from typing import Any, Literal, get_args

#: Every backend a task can run on (``graph_planner/sandbox/registry.py`` maps each to its class).
SandboxName = Literal["local", "docker", "r2egym"]
SANDBOX_NAMES: tuple[SandboxName, ...] = get_args(SandboxName)
#: Other spellings accepted wherever a name is read: seeds 001/002 call the R2E-Gym backend ``repoenv`` (its
#: RepoEnv class).
SANDBOX_ALIASES: dict[str, SandboxName] = {"repoenv": "r2egym"}


def sandbox_choices() -> str:
    """The accepted spellings for an error or help text: ``local, docker, r2egym (repoenv = r2egym)``."""
    aliases = ", ".join(f"{alias} = {name}" for alias, name in SANDBOX_ALIASES.items())
    return ", ".join(SANDBOX_NAMES) + (f" ({aliases})" if aliases else "")


def canonical_sandbox_name(name: str) -> SandboxName:
    """``name`` with its alias resolved; ValueError naming every accepted spelling when it is none of them."""
    resolved = SANDBOX_ALIASES.get(name, name)
    if resolved not in SANDBOX_NAMES:
        raise ValueError(f"unknown sandbox backend {name!r}; choose one of {sandbox_choices()}")
    return resolved  # type: ignore[return-value]  # checked against SANDBOX_NAMES just above


def unalias_sandbox_name(value: Any) -> Any:
    """A pydantic ``mode="before"`` step: an alias becomes its backend name, anything else is left to the
    ``SandboxName`` literal to accept or refuse (its error lists the names)."""
    return SANDBOX_ALIASES.get(value, value) if isinstance(value, str) else value
