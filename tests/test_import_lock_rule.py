"""Every import of transformers / TRL inside a function holds graph_planner.imports.import_lock.

Episodes run in threads; a first ``from transformers import X`` racing another thread's import of the package can
read a half-initialised module (issue 27: ``cannot import name 'AutoTokenizer' from 'transformers'``). A module-level
import runs once, at import time, under Python's own import lock; a function-level one is the risk. This walks the
AST of the project's code, so a new unguarded import fails here before it fails one run in three."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("graph_planner", "flows", "tasks")
GUARDED = ("transformers", "trl")


def _imports_of(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def _holds_lock(with_node: ast.With) -> bool:
    for item in with_node.items:
        expr = item.context_expr
        target = expr.func if isinstance(expr, ast.Call) else expr
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("import_lock", "IMPORT_LOCK"):
            return True
    return False


def unguarded_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every function-level import of a GUARDED package outside ``with import_lock():``."""
    found: list[tuple[int, str]] = []

    def walk(node: ast.AST, in_function: bool, locked: bool) -> None:
        for module in _imports_of(node):
            if in_function and not locked and module.split(".")[0] in GUARDED:
                found.append((node.lineno, module))
        for child in ast.iter_child_nodes(node):
            walk(child, in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)),
                 locked or (isinstance(node, ast.With) and _holds_lock(node)))

    walk(tree, False, False)
    return found


def test_the_rule_finds_an_unguarded_function_level_import_and_accepts_a_guarded_one():
    tree = ast.parse(
        "import transformers\n"  # module level: Python's import lock covers it
        "def bad():\n    from transformers import AutoTokenizer\n"
        "def also_bad():\n    import trl.trainer\n"
        "def good():\n    with import_lock():\n        from transformers import AutoTokenizer\n"
        "def good_too():\n    with imports.import_lock():\n        import trl\n"
        "def other():\n    import json\n")
    assert unguarded_imports(tree) == [(3, "transformers"), (5, "trl.trainer")]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_function_level_transformers_or_trl_import_holds_the_import_lock(package):
    offenders = [f"{path.relative_to(ROOT)}:{line} imports {module}"
                 for path in sorted((ROOT / package).rglob("*.py"))
                 for line, module in unguarded_imports(ast.parse(path.read_text(encoding="utf-8")))]
    assert offenders == [], "wrap these in `with import_lock():` (graph_planner/imports.py):\n" + "\n".join(offenders)
