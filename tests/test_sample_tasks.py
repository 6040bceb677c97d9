"""The bundled sample tasks (datasets/sample) are true: F2P fail on the base and pass with the gold patch,
P2P pass throughout, the rows have the exact Hugging Face columns and regenerate byte-for-byte."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from swebench.harness.log_parsers import parse_log_pytest
from unidiff import PatchSet

from graph_planner.data.gitrepo import GitError, apply_patch, init_deterministic_repo

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "datasets" / "sample"
SWEBENCH_ROWS = SAMPLE_DIR / "swebench" / "test.jsonl"
R2E_ROWS = SAMPLE_DIR / "r2e" / "train.jsonl"
IGNORE = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc", "r2e_tests")


def _load_build_rows():
    # datasets/ is not a package (and must not shadow Hugging Face `datasets`), so load the script by path.
    spec = importlib.util.spec_from_file_location("gp_sample_build_rows", SAMPLE_DIR / "build_rows.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


build_rows = _load_build_rows()
SAMPLE = build_rows.load_sample_set()
TASK_IDS = [task.task_id for task in SAMPLE.tasks]
REPOS = sorted(SAMPLE.repos)


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _pytest_statuses(repo: Path, *targets: str) -> dict[str, str]:
    """Run ``python -m pytest -rA`` in ``repo`` and parse the log with swebench's pytest parser."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *targets],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False)
    statuses = parse_log_pytest(done.stdout, None)
    assert statuses, f"no test results parsed from pytest in {repo}:\n{done.stdout}\n{done.stderr}"
    return statuses


def _checkout(repo: str, dest: Path) -> Path:
    shutil.copytree(SAMPLE_DIR / "repos" / repo, dest, ignore=IGNORE)
    init_deterministic_repo(dest)
    return dest


@pytest.fixture(scope="module")
def swebench_rows() -> dict[str, dict]:
    return {row["instance_id"]: row for row in _read_jsonl(SWEBENCH_ROWS)}


@pytest.fixture(scope="module")
def r2e_rows() -> dict[str, dict]:
    rows = _read_jsonl(R2E_ROWS)
    return {json.loads(row["parsed_commit_content"])["metadata"]["instance_id"]: row for row in rows}


@pytest.fixture(scope="module")
def base_statuses(tmp_path_factory) -> dict[str, dict[str, str]]:
    root = tmp_path_factory.mktemp("base")
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = pool.map(lambda repo: _pytest_statuses(_checkout(repo, root / repo)), REPOS)
        return dict(zip(REPOS, runs))


@pytest.fixture(scope="module")
def task_statuses(tmp_path_factory, swebench_rows, r2e_rows) -> dict[str, tuple[dict, dict]]:
    """Per task: statuses with the test patch + hidden R2E tests, before and after the gold patch."""
    root = tmp_path_factory.mktemp("tasks")

    def run(task_id: str) -> tuple[dict, dict]:
        row, r2e = swebench_rows[task_id], r2e_rows[task_id]
        repo = _checkout(row["repo"].split("/")[1], root / task_id)
        apply_patch(repo, row["test_patch"])
        execution = json.loads(r2e["execution_result_content"])
        (repo / "r2e_tests").mkdir()
        for name, code in zip(execution["test_file_names"], execution["test_file_codes"]):
            (repo / "r2e_tests" / name).write_text(code, encoding="utf-8")
        before = _pytest_statuses(repo, "tests", "r2e_tests")
        apply_patch(repo, row["patch"])
        return before, _pytest_statuses(repo, "tests", "r2e_tests")

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(TASK_IDS, pool.map(run, TASK_IDS)))


def test_sample_set_has_enough_tasks_and_repos(swebench_rows, r2e_rows):
    assert len(SAMPLE.tasks) >= 8
    assert len({task.repo for task in SAMPLE.tasks}) >= 3
    assert list(swebench_rows) == TASK_IDS
    assert sorted(r2e_rows) == sorted(TASK_IDS)


@pytest.mark.parametrize("repo", REPOS)
def test_sample_repo_is_a_multi_module_package_with_graph_edges(repo):
    package = SAMPLE_DIR / "repos" / repo / repo
    modules = {path.stem: ast.parse(path.read_text(encoding="utf-8")) for path in package.glob("*.py")}
    assert len([name for name in modules if name != "__init__"]) >= 3
    imports_sibling = any(isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"{repo}.")
                          for name, tree in modules.items() if name != "__init__" for node in ast.walk(tree))
    subclasses = [node.name for tree in modules.values() for node in ast.walk(tree)
                  if isinstance(node, ast.ClassDef) and node.bases]
    assert imports_sibling and subclasses


@pytest.mark.parametrize("repo", REPOS)
def test_existing_tests_pass_at_base(repo, base_statuses):
    statuses = base_statuses[repo]
    assert len(statuses) >= 10
    assert {status for status in statuses.values()} == {"PASSED"}, statuses


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_fail_to_pass_fails_and_pass_to_pass_passes_before_the_fix(task_id, swebench_rows, task_statuses):
    row = swebench_rows[task_id]
    before, _ = task_statuses[task_id]
    failing = {test: before.get(test) for test in json.loads(row["FAIL_TO_PASS"]) if before.get(test) == "PASSED"}
    assert not failing, f"FAIL_TO_PASS tests already pass on the base: {failing}"
    assert all(test in before for test in json.loads(row["FAIL_TO_PASS"])), "F2P tests must be collected"
    broken = {test: before.get(test) for test in json.loads(row["PASS_TO_PASS"]) if before.get(test) != "PASSED"}
    assert not broken, f"PASS_TO_PASS tests not passing on the base: {broken}"


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_gold_patch_makes_all_fail_to_pass_and_pass_to_pass_pass(task_id, swebench_rows, task_statuses):
    row = swebench_rows[task_id]
    _, after = task_statuses[task_id]
    tests = json.loads(row["FAIL_TO_PASS"]) + json.loads(row["PASS_TO_PASS"])
    assert {test: after.get(test) for test in tests} == {test: "PASSED" for test in tests}


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_r2e_expected_output_is_what_hidden_tests_give_at_the_fix(task_id, r2e_rows, task_statuses):
    before, after = task_statuses[task_id]
    expected = json.loads(r2e_rows[task_id]["expected_output_json"])

    def hidden(statuses: dict[str, str]) -> dict[str, str]:
        return {".".join(node.split("::")[1:]): status for node, status in statuses.items()
                if node.startswith("r2e_tests/")}

    assert hidden(after) == expected
    assert hidden(before) != expected, "hidden tests must fail somewhere before the fix"
    assert all("::" not in key and "/" not in key for key in expected)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_patches_split_code_and_tests(task_id, swebench_rows):
    row = swebench_rows[task_id]
    gold_files = [patched.path for patched in PatchSet(row["patch"])]
    test_files = [patched.path for patched in PatchSet(row["test_patch"])]
    assert gold_files and not any(build_rows.is_test_path(path) for path in gold_files)
    assert test_files and all(path.startswith("tests/") for path in test_files)
    assert all(test.split("::")[0] in test_files for test in json.loads(row["FAIL_TO_PASS"]))
    added = [line.value.strip() for patched in PatchSet(row["patch"]) for hunk in patched for line in hunk
             if line.is_added and len(line.value.strip()) > 12]
    leaked = [line for line in added if line in row["problem_statement"]]
    assert not leaked, f"the problem statement reveals the fix: {leaked}"


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_r2e_parsed_commit_rebuilds_gold_and_test_patches(task_id, swebench_rows, r2e_rows):
    row, r2e = swebench_rows[task_id], r2e_rows[task_id]
    commit = json.loads(r2e["parsed_commit_content"])
    assert commit["old_commit_hash"] == row["base_commit"]
    assert commit["new_commit_hash"] == r2e["commit_hash"]
    assert build_rows.patch_from_file_diffs(commit["file_diffs"], tests=False) == row["patch"]
    assert build_rows.patch_from_file_diffs(commit["file_diffs"], tests=True) == row["test_patch"]
    repo_dir = SAMPLE_DIR / "repos" / r2e["repo_name"]
    for diff in commit["file_diffs"]:
        path = repo_dir / diff["header"]["file"]["path"]
        assert diff["old_file_content"] == (path.read_text(encoding="utf-8") if path.exists() else "")
    assert r2e["docker_image"] == f"graph-planner/sample-{r2e['repo_name']}:{r2e['commit_hash'][:12]}"
    assert r2e["problem_statement"].startswith("[ISSUE]") and r2e["problem_statement"].endswith("[/ISSUE]")


def test_rows_load_with_hf_datasets_and_have_exact_columns(tmp_path):
    datasets = pytest.importorskip("datasets")
    cache = str(tmp_path)
    for path, columns in ((SWEBENCH_ROWS, build_rows.SWEBENCH_COLUMNS), (R2E_ROWS, build_rows.R2E_COLUMNS)):
        loaded = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=cache)
        assert sorted(loaded.column_names) == sorted(columns)
        assert len(loaded) == len(TASK_IDS)
    # The directories carry dataset cards, so they load like the Hub datasets: same split names and types.
    swebench = datasets.load_dataset(str(SWEBENCH_ROWS.parent), split="test", cache_dir=cache)
    assert {name: feature.dtype for name, feature in swebench.features.items()} == {
        name: "string" for name in build_rows.SWEBENCH_COLUMNS}
    for row in swebench:
        assert isinstance(json.loads(row["FAIL_TO_PASS"]), list) and isinstance(json.loads(row["PASS_TO_PASS"]), list)
    r2e = datasets.load_dataset(str(R2E_ROWS.parent), split="train", cache_dir=cache)
    assert list(r2e.column_names) == list(build_rows.R2E_COLUMNS)
    assert r2e.features["num_non_test_lines"].dtype == "int64"
    assert r2e.features["modified_files"].feature.dtype == "string"
    assert r2e.features["modified_entity_summaries"].feature["start_lineno"].dtype == "int64"
    assert all(isinstance(json.loads(row["parsed_commit_content"])["file_diffs"], list) for row in r2e)


@pytest.mark.parametrize("repo", REPOS)
def test_base_commit_is_the_deterministic_commit_of_a_fresh_copy(repo, swebench_rows, tmp_path):
    commits = {row["base_commit"] for row in swebench_rows.values() if row["repo"].endswith(f"/{repo}")}
    assert len(commits) == 1
    copy = shutil.copytree(SAMPLE_DIR / "repos" / repo, tmp_path / repo, ignore=IGNORE)
    assert init_deterministic_repo(copy) in commits
    assert build_rows.base_commit_of(SAMPLE_DIR / "repos" / repo) in commits


def test_init_deterministic_repo_is_reproducible_and_content_addressed(tmp_path):
    first, second, changed = (tmp_path / name for name in ("first", "second", "changed"))
    for path in (first, second, changed):
        path.mkdir()
        (path / "module.py").write_text("VALUE = 1\n")
    (changed / "module.py").write_text("VALUE = 2\n")
    assert init_deterministic_repo(first) == init_deterministic_repo(second) != init_deterministic_repo(changed)
    with pytest.raises(GitError, match="already has a .git"):
        init_deterministic_repo(first)


@pytest.mark.slow
def test_build_rows_regenerates_identical_files(tmp_path):
    build_rows.build_rows(tmp_path)
    for directory in ("swebench", "r2e"):
        for committed in sorted((SAMPLE_DIR / directory).iterdir()):
            assert (tmp_path / directory / committed.name).read_bytes() == committed.read_bytes(), committed
