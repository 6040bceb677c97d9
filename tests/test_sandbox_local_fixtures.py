"""A tiny real task repo (2-module package + a test file) with real gold / test patches made by git, in both
SWE-bench shape (test_patch + FAIL_TO_PASS/PASS_TO_PASS) and R2E shape (hidden tests + expected outputs).
Imported by the sandbox / grading / validate tests; holds no tests itself."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord

OPS_BUGGY = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
OPS_FIXED = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
TEST_OPS = "from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"
TEST_OPS_PATCHED = TEST_OPS + "\n\ndef test_sub_zero():\n    assert sub(0, 0) == 0\n"
TEST_ADD = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
R2E_TEST = (
    "from calc import add, sub\n\n\nclass TestCalc:\n"
    "    def test_add(self):\n        assert add(2, 2) == 4\n\n"
    "    def test_sub(self):\n        assert sub(2, 2) == 0\n"
)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


def _diff_of(repo: Path, changes: dict[str, str]) -> str:
    """Real `git diff` of applying ``changes`` (path -> new content) to the committed tree; tree left untouched."""
    for path, content in changes.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "--cached", "HEAD")
    _git(repo, "reset", "-q", "--hard", "HEAD")
    _git(repo, "clean", "-fdq")
    return diff


def make_calc_repo(root: Path, with_git: bool = True) -> tuple[Path, str, str]:
    """Write the repo under root/repos/calc; returns (repo, gold_patch, test_patch)."""
    repo = root / "repos" / "calc"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("from calc.ops import add, sub\n")
    (repo / "calc" / "ops.py").write_text(OPS_BUGGY)
    (repo / "tests" / "test_ops.py").write_text(TEST_OPS)
    (repo / "README.md").write_text("calc\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    gold = _diff_of(repo, {"calc/ops.py": OPS_FIXED})
    test_patch = _diff_of(repo, {"tests/test_add.py": TEST_ADD, "tests/test_ops.py": TEST_OPS_PATCHED})
    if not with_git:
        subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    return repo, gold, test_patch


#: The venv's pytest plugins (hydra from verl, anyio, ...) add ~1 s to every test run; the calc tests need none.
FAST_PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def swebench_task(root: Path, gold: str, test_patch: str, **update: object) -> TaskRecord:
    data: dict[str, object] = {
        "task_id": "calc__calc-1", "source": "swebench", "split": "test", "repo": "calc/calc",
        "problem_statement": "add() subtracts instead of adding", "repo_path": "repos/calc",
        "test_cmd": "python -m pytest -rA -p no:cacheprovider", "test_files": ["tests/test_add.py", "tests/test_ops.py"],
        "fail_to_pass": ["tests/test_add.py::test_add"],
        "pass_to_pass": ["tests/test_ops.py::test_sub", "tests/test_ops.py::test_sub_zero"],
        "gold_patch": gold, "test_patch": test_patch, "env": FAST_PYTEST_ENV,
    }
    data.update(update)
    return TaskRecord.model_validate(data)


def r2e_task(root: Path, gold: str, **update: object) -> TaskRecord:
    data: dict[str, object] = {
        "task_id": "calc_r2e_1", "source": "r2e_gym", "split": "train", "repo": "calc",
        "problem_statement": "add() subtracts instead of adding", "repo_path": "repos/calc",
        "test_cmd": "python -m pytest -rA -p no:cacheprovider", "test_files": ["r2e_tests"],
        "hidden_tests": {"test_1.py": R2E_TEST},
        "expected_output": {"TestCalc.test_add": "PASSED", "TestCalc.test_sub": "PASSED"},
        "gold_patch": gold, "env": FAST_PYTEST_ENV,
    }
    data.update(update)
    return TaskRecord.model_validate(data)


def local_config(**sandbox: object) -> RunConfig:
    return RunConfig.model_validate({"sandbox": {"exec_timeout": 30.0, "test_timeout": 60.0, **sandbox}})


def tree_hashes(repo: Path) -> dict[str, str]:
    """sha256 of every file under repo (except .git and bytecode caches), keyed by relative path."""
    out: dict[str, str] = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo)
        if rel.parts[0] == ".git" or "__pycache__" in rel.parts or path.is_dir():
            continue
        out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest() + ("x" if path.stat().st_mode & 0o111 else "")
    return out
