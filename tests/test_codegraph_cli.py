"""`gp graph`: a researcher builds a repo's code graph and runs the planner's find / expand / read from a shell, and
sees the ids, ranking and code the planner would see."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.env.samples import SAMPLE_DIR

REPO = SAMPLE_DIR / "repos" / "invcalc"
runner = CliRunner()


def gp(*args: str):
    return runner.invoke(app, ["graph", *args])


def test_build_prints_counts_and_saves_a_graph_that_reloads(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    result = gp("build", str(REPO), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert re.search(r"node FUNCTION\s*│\s*\d+", result.output)
    assert re.search(r"edge calls\s*│\s*\d+", result.output)
    saved = json.loads(out.read_text())
    assert any(n["id"] == "fn:invcalc/cart.py::Cart.add" for n in saved["nodes"])

    # the saved graph answers queries exactly as a fresh build does
    from_file = gp("find", "add", "--graph", str(out), "--limit", "3")
    from_dir = gp("find", "add", str(REPO), "--limit", "3")
    assert from_file.exit_code == 0 and from_file.output.splitlines()[1:] == from_dir.output.splitlines()[1:]


def test_find_expand_read_show_pasteable_ids_and_numbered_code() -> None:
    found = gp("find", "cart add", str(REPO), "--limit", "5")
    assert found.exit_code == 0, found.output
    ids = [line.split()[2] for line in found.output.splitlines()[1:]]
    assert "fn:invcalc/cart.py::Cart.add" in ids  # whole, not wrapped: it can be pasted back

    expanded = gp("expand", "fn:invcalc/cart.py::Cart.add", str(REPO), "--hop", "1")
    assert expanded.exit_code == 0
    assert "cls:invcalc/cart.py::Cart" in expanded.output and "contains<-" in expanded.output

    code = gp("read", "fn:invcalc/cart.py::Cart.add", str(REPO))
    assert code.exit_code == 0
    source = (REPO / "invcalc" / "cart.py").read_text().splitlines()
    def_line = next(i for i, line in enumerate(source, start=1) if "def add(" in line)
    assert re.search(rf"^\s*{def_line} \| .*def add\(", code.output, re.M)


def test_unknown_node_names_close_ids_and_fails() -> None:
    result = gp("read", "fn:invcalc/cart.py::Cart.ad", str(REPO))
    assert result.exit_code == 1
    assert "fn:invcalc/cart.py::Cart.add" in result.output


def test_exactly_one_graph_source_is_required(tmp_path: Path) -> None:
    none = gp("find", "add")
    assert none.exit_code == 2 and "exactly one of" in none.output
    both = gp("find", "add", str(REPO), "--graph", str(tmp_path / "g.json"))
    assert both.exit_code == 2 and "exactly one of" in both.output


def test_task_graph_is_built_from_the_task_sandbox_at_its_base_commit() -> None:
    result = gp("find", "parse config", "--task", "graphplanner-samples__minicfg-3", "--limit", "3")
    assert result.exit_code == 0, result.output
    assert "graphplanner-samples/minicfg" in result.output.splitlines()[0]
    assert "minicfg/config.py" in result.output
    missing = gp("find", "x", "--task", "no-such-task")
    assert missing.exit_code == 2 and "no task 'no-such-task'" in missing.output
