"""The library's layers (docs/architecture.md) hold: no module imports a package above its own, the DAG packages
(tasks/, flows/) sit on top of the library, and no two modules import each other round a cycle.

Every import counts, lazy ones inside functions and ``TYPE_CHECKING`` ones included: a lazy upward import is still
an upward dependency, only hidden from the interpreter's start-up.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# low -> high: a package may import itself and anything listed before it, nothing after it.
LAYERS = [
    "graph_planner",  # the package root: __version__ only
    "graph_planner.disk",  # atomic writes, the room check and full/read-only disk errors (exit 5)
    "graph_planner.termination",  # SIGTERM / SIGINT: the exception and exit every layer may see
    "graph_planner.imports",  # first imports of heavy packages under one lock (episode threads)
    "graph_planner.config",
    "graph_planner.data",
    "graph_planner.episode",
    "graph_planner.grading",
    "graph_planner.sandbox",
    "graph_planner.codegraph",
    "graph_planner.models",
    "graph_planner.agents",
    "graph_planner.telemetry",
    "graph_planner.env",
    "graph_planner.integrations",
    "graph_planner.validation",
    "graph_planner.eval",
    # task synthesis / mining: runs sandboxes, reads the code graph, writes data, validates on eval's Ray executor
    "graph_planner.synth",
    "graph_planner.training",
    "graph_planner.cli_help",  # help text of the gp command (examples), below the command itself
    "graph_planner.cli",
    "tasks",
    "flows",
]
RANK = {name: i for i, name in enumerate(LAYERS)}


def layer_of(module: str) -> str | None:
    """The LAYERS entry a dotted module name belongs to (longest prefix), None for a third-party module."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in RANK and (n > 1 or prefix in ("tasks", "flows") or len(parts) == 1):
            return prefix
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import statement in the file, relative ones resolved."""
    module = module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:  # `from pkg import submodule` depends on the submodule
                yield node.lineno, f"{target}.{alias.name}"


def source_files() -> list[Path]:
    return sorted(p for top in ("graph_planner", "tasks", "flows") for p in (ROOT / top).rglob("*.py"))


def known_modules() -> set[str]:
    return {module_name(p) for p in source_files()}


def test_every_library_package_has_a_layer():
    packages = {p.parent.relative_to(ROOT).as_posix().replace("/", ".") for p in (ROOT / "graph_planner").rglob("*.py")}
    top_level = {".".join(p.split(".")[:2]) for p in packages} | {
        module_name(p) for p in (ROOT / "graph_planner").glob("*.py") if p.name != "__init__.py"}
    missing = sorted(t for t in top_level if t not in RANK)
    assert not missing, f"add these packages to LAYERS (and to docs/architecture.md): {missing}"


def test_no_upward_import():
    modules = known_modules()
    upward = []
    for path in source_files():
        source = module_name(path)
        source_rank = RANK[layer_of(source) or source]
        for line, target in imports_of(path):
            if target not in modules:
                continue  # third-party, or a name imported from a module (the module itself is checked)
            layer = layer_of(target)
            if layer is not None and RANK[layer] > source_rank:
                upward.append(f"{path.relative_to(ROOT)}:{line}: {source} imports {target} ({layer} is above "
                              f"{layer_of(source)})")
    assert not upward, "upward imports (move the shared code down a layer):\n" + "\n".join(upward)


def test_library_never_imports_the_dag():
    offenders = [f"{p.relative_to(ROOT)}:{line}: {target}" for p in (ROOT / "graph_planner").rglob("*.py")
                 for line, target in imports_of(p) if target.split(".")[0] in ("prefect", "tasks", "flows")]
    assert not offenders, offenders


def test_no_module_level_import_cycle():
    """File-level cycles (a.py -> b.py -> a.py, lazy imports included); a package's __init__ re-exporting its
    modules is not an edge back."""
    modules = known_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    inits = {module_name(p) for p in source_files() if p.name == "__init__.py"}
    for path in source_files():
        source = module_name(path)
        if source in inits:
            continue
        for _, target in imports_of(path):
            if target in modules and target not in inits and target != source:
                graph[source].add(target)
    cycles = _cycles(graph)
    assert not cycles, f"import cycles between modules: {cycles}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.mark.parametrize(("importer", "imported", "upward"), [
    ("graph_planner.sandbox.shell", "graph_planner.env.planner_env", True),
    ("graph_planner.env.planner_env", "graph_planner.sandbox.base", False),
    ("flows.pipeline", "tasks.training", False),
    ("tasks.training", "flows.pipeline", True),
])
def test_the_layer_rule_itself(importer, imported, upward):
    """The checker flags exactly the imports that go up (guards the test against a LAYERS/prefix bug)."""
    assert (RANK[layer_of(imported)] > RANK[layer_of(importer)]) is upward


def test_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_planner_env_is_built_in_one_place():
    """Outside tests, only graph_planner/env/assembly.py constructs a PlannerEnv (synthesiser + sandbox + graph
    cache wired once), so every runner gets the same episode."""
    builders = []
    for path in [*source_files(), *sorted((ROOT / "benchmarks").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "PlannerEnv":
                builders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert [b.split(":")[0] for b in builders] == ["graph_planner/env/assembly.py"], builders


#: Inside training/: the two engines never import each other (what both need is the shared objective, grpo.py, or
#: a package below training); ray/ submits the verl job, so it may import verl/, never local/; sft/ produces a model
#: dir any engine starts from, so it imports neither engine's machinery beyond the local rollout it records.
ENGINE_RULES = {
    "graph_planner.training.local": ("graph_planner.training.verl", "graph_planner.training.ray",
                                     "graph_planner.training.sft"),
    "graph_planner.training.verl": ("graph_planner.training.local", "graph_planner.training.ray",
                                    "graph_planner.training.sft"),
    "graph_planner.training.ray": ("graph_planner.training.local", "graph_planner.training.sft"),
    "graph_planner.training.sft": ("graph_planner.training.verl", "graph_planner.training.ray"),
}


def test_training_engines_stay_apart():
    offenders = []
    for path in (ROOT / "graph_planner" / "training").rglob("*.py"):
        source = module_name(path)
        for package, forbidden in ENGINE_RULES.items():
            if source == package or source.startswith(package + "."):
                offenders += [f"{path.relative_to(ROOT)}:{line}: {source} imports {target}"
                              for line, target in imports_of(path)
                              if any(target == f or target.startswith(f + ".") for f in forbidden)]
    assert not offenders, "training/ engines import each other:\n" + "\n".join(offenders)
