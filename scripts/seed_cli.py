"""The seeds' script names (seed 000 section 0/3/7, seed 001, seed 002), kept so their commands work as written.

Each ``scripts/<seed script>.py`` calls :func:`run` with its ``gp`` command; seed-only flags are translated to
``gp`` flags here (docs/seed_compatibility.md lists every one). Nothing else lives in these wrappers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python scripts/x.py` without PYTHONPATH=. works too
    sys.path.insert(0, str(ROOT))

#: seed flag -> (gp flag or ``--set`` key, takes a value)
Translation = dict[str, tuple[str, bool]]

TRAIN_FLAGS: Translation = {
    "--use-fallback": ("env.use_rule_fallback=true", False),  # seed 002
    "--dataset-name": ("data.dataset_name", True),  # seed 002
    "--ray-address": ("resources.ray_address", True),  # seed 002
    "--disable-cgm-synthesis": ("--disable-cgm-synthesis", False),
}


def translate(argv: Sequence[str], table: Translation) -> list[str]:
    """Rewrite seed-only flags: a dotted target becomes ``--set key=value``, a ``--flag`` target is renamed."""
    out: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        arg = items[i]
        name, _, inline = arg.partition("=")
        if name in table:
            target, takes_value = table[name]
            value = inline or (items[i + 1] if takes_value and not inline and i + 1 < len(items) else "")
            if takes_value and not inline:
                i += 1
            if target.startswith("--"):
                out += [target] + ([value] if takes_value else [])
            else:
                out += ["--set", f"{target}={value}" if takes_value else target]
        else:
            out.append(arg)
        i += 1
    return out


def run(command: Sequence[str], argv: Sequence[str], table: Translation | None = None,
        after: Callable[[list[str]], int] | None = None) -> int:
    """``gp <command> <translated argv>``; ``after`` runs on success (e.g. a prepull after data prep)."""
    from graph_planner.cli import app

    args = [*command, *translate(argv, table or {})]
    code = 0
    try:
        app(args, prog_name="gp")
    except SystemExit as exc:  # click always exits; its code is the command's
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if code or after is None:
        return code
    return after(args)


PREPULL_FLAGS = {"--prepull-max-workers": "--max-workers", "--prepull-retries": "--retries",
                 "--prepull-delay": "--delay", "--prepull-timeout": "--timeout"}


def prepare_then_prepull(argv: Sequence[str], default_skip: str) -> int:
    """Seed 000 section 0: ``gp data prepare`` (``default_skip`` unless that source's flags are given), then with
    ``--prepull-containers`` ``gp images prepull`` of the combined manifest the prepare wrote."""
    args, pull = [], []
    prepull = False
    items = list(argv)
    i = 0
    while i < len(items):
        name, _, inline = items[i].partition("=")
        if name == "--prepull-containers":
            prepull = True
        elif name in PREPULL_FLAGS:
            value = inline or items[i + 1]
            i += 0 if inline else 1
            pull += [PREPULL_FLAGS[name], value]
        else:
            args.append(items[i])
        i += 1
    source = "swebench" if default_skip == "--skip-swebench" else "r2e"
    if not any(a.startswith(f"--{source}") or a.startswith("--with-") for a in args):
        args.append(default_skip)

    def after(prepare_args: list[str]) -> int:
        if not prepull:
            return 0
        from graph_planner.config import load_run_config

        out = _flag(prepare_args, "--out")
        config_file = _flag(prepare_args, "--config-file") or _flag(prepare_args, "-c")
        config = load_run_config(config_file, {"data.output_dir": out} if out else {})
        manifest = Path(config.data.output_dir) / "docker_images.txt"
        return run(["images", "prepull", "--manifest", str(manifest), *pull], [])

    return run(["data", "prepare"], args, after=after)


def _flag(args: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None
