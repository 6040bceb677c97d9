"""Where graph files come from (a dir, a tar, the task's sandbox), the (repo, commit) cache, a bundled repo."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest
from test_codegraph_fixtures import package_files
from test_sandbox_local_fixtures import OPS_BUGGY, local_config, make_calc_repo, r2e_task, swebench_task

from graph_planner.codegraph.builder import apply_changes, build_graph
from graph_planner.codegraph.cache import GraphCache
from graph_planner.codegraph.schema import EdgeKind, NodeKind
from graph_planner.codegraph.sources import files_from_tar, load_files_from_dir, load_files_from_sandbox
from graph_planner.sandbox.local import LocalSandbox

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_REPOS = REPO_ROOT / "datasets" / "sample" / "repos"


def write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)


def test_load_files_from_dir_skips_hidden_tests_vcs_binary_and_large_files(tmp_path):
    write_tree(tmp_path, {
        **package_files(),
        ".git/config": "[core]\n",
        "r2e_tests/test_hidden.py": "def test_secret():\n    pass\n",
        "pkg/__pycache__/x.cpython-311.pyc": b"\x00\x01binary",
        "docs/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00",
        "big.txt": "x" * 1_100_000,
    })
    files = load_files_from_dir(tmp_path)
    assert "pkg/shapes.py" in files and "README.md" in files
    assert not any(p.startswith((".git/", "r2e_tests/")) or "__pycache__" in p for p in files)
    assert "docs/logo.png" not in files and "big.txt" not in files


def test_files_from_a_docker_style_directory_tar_are_repo_relative():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        root = tarfile.TarInfo("testbed")
        root.type = tarfile.DIRTYPE
        tar.addfile(root)
        for path, text in {"testbed/pkg/a.py": "x = 1\n", "testbed/.git/HEAD": "ref\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert files_from_tar(buffer.getvalue()) == {"pkg/a.py": b"x = 1\n"}


def test_graph_is_built_from_the_task_sandbox_not_the_host(tmp_path):
    _, gold, test_patch = make_calc_repo(tmp_path)
    task = swebench_task(tmp_path, gold, test_patch)
    with LocalSandbox(task, local_config().sandbox, tmp_path, "cg") as sandbox:
        sandbox.write_file("calc/extra.py", "from calc.ops import add\n\n\ndef twice(x):\n    return add(x, x)\n")
        files = load_files_from_sandbox(sandbox)
        graph = build_graph(files, task.repo, task.base_commit)
        assert files["calc/ops.py"].decode() == OPS_BUGGY
        assert "fn:calc/extra.py::twice" in graph.nodes  # an untracked file of the sandbox's working copy
        assert not any(path.startswith("graph_planner/") for path in files)  # never the host checkout
        calls = {(e.src, e.dst) for e in graph.edges() if e.kind == EdgeKind.CALLS and e.resolved}
        assert ("fn:calc/extra.py::twice", "fn:calc/ops.py::add") in calls
        # after a patch only the changed file is re-read and the graph equals a rebuild of the patched tree
        sandbox.apply_patch(gold)
        apply_changes(graph, {"calc/ops.py": sandbox.read_file("calc/ops.py")})
        rebuilt = build_graph(load_files_from_sandbox(sandbox), task.repo, task.base_commit)
        assert json.dumps(graph.to_json(), sort_keys=True) == json.dumps(rebuilt.to_json(), sort_keys=True)


def test_hidden_r2e_tests_never_enter_the_graph(tmp_path):
    _, gold, _ = make_calc_repo(tmp_path)
    task = r2e_task(tmp_path, gold)
    with LocalSandbox(task, local_config().sandbox, tmp_path, "cg") as sandbox:
        files = load_files_from_sandbox(sandbox)
    assert files and not any("r2e_tests" in path for path in files)


def test_cache_hits_by_repo_and_commit_and_returns_independent_graphs(tmp_path):
    cache = GraphCache(tmp_path / "graphs")
    loads: list[str] = []

    def loader():
        loads.append("load")
        return package_files()

    first = cache.get_or_build("acme/shapes", "c1", loader)
    second = cache.get_or_build("acme/shapes", "c1", loader)
    assert (cache.hits, cache.misses, len(loads)) == (1, 1, 1)
    assert json.dumps(second.to_json()) == json.dumps(first.to_json())
    apply_changes(second, {"pkg/util.py": None})  # one episode's patch must not leak into the next
    assert "fn:pkg/util.py::clamp" in cache.get_or_build("acme/shapes", "c1", loader).nodes
    cache.get_or_build("acme/shapes", "c2", loader)  # another commit
    cache.get_or_build("other/shapes", "c1", loader)  # another repo, same commit
    assert (cache.hits, cache.misses, len(loads)) == (2, 3, 3)


def test_cache_rebuilds_an_unreadable_entry_and_skips_caching_without_a_commit(tmp_path):
    cache = GraphCache(tmp_path)
    cache.get_or_build("r", "c", package_files)
    with gzip.open(cache.path_for("r", "c"), "wt") as handle:
        handle.write("{not json")
    graph = cache.get_or_build("r", "c", package_files)
    assert "cls:pkg/shapes.py::Square" in graph.nodes and cache.misses == 2
    cache.get_or_build("r", None, package_files)
    assert sorted(p.name for p in tmp_path.iterdir()) == [cache.path_for("r", "c").name]


@pytest.mark.skipif(not (SAMPLE_REPOS / "invcalc").is_dir(), reason="bundled sample repos not present")
def test_bundled_sample_repo_resolves_imports_calls_and_inheritance_across_modules():
    graph = build_graph(load_files_from_dir(SAMPLE_REPOS / "invcalc"), "graphplanner-samples/invcalc", None)
    kinds = {node.kind for node in graph.nodes.values()}
    assert {NodeKind.REPO, NodeKind.PACKAGE, NodeKind.FILE, NodeKind.TEXTFILE, NodeKind.CLASS,
            NodeKind.FUNCTION} <= kinds
    cross_file = {EdgeKind.IMPORTS: 0, EdgeKind.CALLS: 0}
    for edge in graph.edges():
        if edge.kind in cross_file and edge.resolved and \
                graph.nodes[edge.src].path != graph.nodes[edge.dst].path:
            cross_file[edge.kind] += 1
    assert all(count > 0 for count in cross_file.values()), cross_file
    extends = {(e.src, e.dst, e.resolved) for e in graph.edges() if e.kind == EdgeKind.EXTENDS}
    assert ("cls:invcalc/discounts.py::BulkDiscount", "cls:invcalc/discounts.py::PercentageDiscount", True) in extends
    assert ("cls:invcalc/errors.py::InvcalcError", "Exception", False) in extends  # builtin base kept by name
