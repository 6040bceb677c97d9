"""`gp ... --help` is readable in an 80-column terminal and every command shows examples whose flags exist."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.cli_help import EXAMPLES


def _commands() -> dict[str, Any]:
    root = typer.main.get_command(app)
    found: dict[str, Any] = {}

    def walk(group, prefix: str) -> None:
        for name, command in group.commands.items():
            if hasattr(command, "commands"):  # a group (typer may vendor its own click classes)
                found[f"{prefix}{name}"] = command
                walk(command, f"{prefix}{name} ")
            else:
                found[f"{prefix}{name}"] = command

    walk(root, "")
    return found


COMMANDS = _commands()


GROUPS = {path for path, command in COMMANDS.items() if hasattr(command, "commands")}


def test_every_command_has_examples() -> None:
    assert sorted(set(COMMANDS) - GROUPS - set(EXAMPLES)) == []
    assert sorted(set(EXAMPLES) - set(COMMANDS)) == [], "examples for commands that do not exist"


@pytest.mark.parametrize("path", sorted(EXAMPLES))
def test_examples_use_only_real_flags(path: str) -> None:
    command = COMMANDS[path]
    flags = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    for example in EXAMPLES[path]:
        words = shlex.split(example)
        assert words[:1 + len(path.split())] == ["gp", *path.split()], example
        unknown = [w.split("=")[0] for w in words if w.startswith("-") and w.split("=")[0] not in flags]
        assert not unknown, f"{example!r} uses {unknown}, not options of `gp {path}`"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_help_fits_80_columns_with_whole_option_names(path: str) -> None:
    result = CliRunner().invoke(app, [*path.split(), "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    assert "…" not in result.output, "an option name or help text was cut"
    assert "<bool>" not in result.output, "flags shown with a type badge"
    assert "Examples:" in result.output
    long_lines = [line for line in result.output.splitlines() if len(line) > 80 and not line.startswith("    gp ")]
    assert not long_lines, long_lines
    for param in COMMANDS[path].params:
        if getattr(param, "hidden", False):  # old spellings kept working (e.g. --backend), not advertised
            continue
        for opt in param.opts:
            if opt.startswith("--"):
                assert opt in result.output, f"{opt} missing from the help"
