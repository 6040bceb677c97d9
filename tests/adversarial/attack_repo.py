"""A small real task built for attacks: a git repo whose base commit has a root conftest.py, a pyproject.toml with
a pytest section and a setup.cfg without one; a hidden test file (test_patch); and *future* history (the fix
commit on a branch, a tag, a stash) that no sandbox may keep. Every attack is a real unified diff made by git.
Imported by the adversarial tests (``attack_fixture`` makes their module-scoped repository fixture); holds no tests itself."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixtures

from graph_planner.config.schema import RunConfig  # noqa: E402
from graph_planner.data.record import TaskRecord  # noqa: E402

OPS_BUGGY = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
OPS_FIXED = OPS_BUGGY.replace("return a - b\n\n\ndef sub", "return a + b\n\n\ndef sub")
TEST_OPS = "from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"
TEST_OPS_PATCHED = TEST_OPS + "\n\ndef test_sub_zero():\n    assert sub(0, 0) == 0\n"
HIDDEN_MARK = "HIDDEN-ASSERTION-TEXT-7f3a"
TEST_ADD = f"from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3, '{HIDDEN_MARK}'\n"
PYPROJECT = ('[project]\nname = "calc"\nversion = "0.1"\n\n'
             '[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n')
SETUP_CFG = "[flake8]\nmax-line-length = 100\n"
TEST_CMD = "python -m pytest -rA"

#: A pytest hook that reports every test as passed: the canonical force-pass.
FORCE_PASS_HOOK = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
                   "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                   "    outcome.get_result().outcome = 'passed'\n")
#: A test module that "fixes" the package only inside the test process, at collection time.
PATCH_AT_IMPORT = "import calc\nimport calc.ops\n\ncalc.add = calc.ops.add = lambda a, b: a + b\n"
#: The same, as a module a `-p` option or a sitecustomize would load.
FORCE_PASS_PLUGIN = FORCE_PASS_HOOK


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
                          cwd=repo, check=True, capture_output=True, text=True).stdout


def diff_of(repo: Path, changes: dict[str, str | None]) -> str:
    """Real `git diff` of ``changes`` (path -> new content, None = delete) against HEAD; the tree is left clean."""
    for path, content in changes.items():
        target = repo / path
        if content is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD")
    git(repo, "clean", "-fdq")
    return diff


class AttackRepo:
    """repos/calc under ``root`` at the base commit, plus the patches the tests need."""

    image: str | None = None  # set by the docker tests once the image is built

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = root / "repos" / "calc"
        repo = self.repo
        files = {"calc/__init__.py": "from calc.ops import add, sub\n", "calc/ops.py": OPS_BUGGY,
                 "tests/test_ops.py": TEST_OPS, "conftest.py": "# the task's own conftest\n",
                 "pyproject.toml": PYPROJECT, "setup.cfg": SETUP_CFG, "README.md": "calc\n",
                 ".gitignore": "__pycache__/\n*.pyc\nbuild/\n"}
        for rel, text in files.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "base")
        self.base = git(repo, "rev-parse", "HEAD").strip()
        self.gold = diff_of(repo, {"calc/ops.py": OPS_FIXED})
        self.test_patch = diff_of(repo, {"tests/test_add.py": TEST_ADD, "tests/test_ops.py": TEST_OPS_PATCHED})
        # the future: the fix committed on a branch and tagged, then the checkout goes back to the base
        git(repo, "checkout", "-q", "-b", "fix")
        (repo / "calc" / "ops.py").write_text(OPS_FIXED)
        (repo / "tests" / "test_add.py").write_text(TEST_ADD)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "the fix (future)")
        self.future = git(repo, "rev-parse", "HEAD").strip()
        self.future_blob = git(repo, "rev-parse", "HEAD:tests/test_add.py").strip()
        git(repo, "tag", "v1.0")
        git(repo, "checkout", "-q", "main")
        (repo / "README.md").write_text("stashed future work\n")
        git(repo, "stash", "-q")

    def task(self, **update: object) -> TaskRecord:
        data: dict[str, object] = {
            "task_id": "calc__calc-7", "source": "swebench", "split": "test", "repo": "calc/calc",
            "problem_statement": "add() subtracts", "repo_path": "repos/calc", "base_commit": self.base,
            "test_cmd": TEST_CMD, "test_files": ["tests/test_add.py", "tests/test_ops.py"],
            "fail_to_pass": ["tests/test_add.py::test_add"],
            "pass_to_pass": ["tests/test_ops.py::test_sub", "tests/test_ops.py::test_sub_zero"],
            "gold_patch": self.gold, "test_patch": self.test_patch,
            "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        }
        data.update(update)
        return TaskRecord.model_validate(data)

    def patch(self, changes: dict[str, str | None], with_gold: bool = False) -> str:
        """An attack diff (optionally on top of the real fix)."""
        if with_gold:
            changes = {"calc/ops.py": OPS_FIXED, **changes}
        return diff_of(self.repo, changes)

    def plain_pytest(self, where: Path, patch: str, targets: list[str]) -> subprocess.CompletedProcess[str]:
        """What a grader with no guard and no checks sees: a plain checkout at the base in ``where`` with ``patch``
        and the hidden tests applied, pytest run on ``targets`` directly (the baseline that shows an attack is real)."""
        shutil.copytree(self.repo, where)
        git(where, "checkout", "-q", self.base)
        for diff in (patch, self.test_patch):
            subprocess.run(["git", "apply", "-"], input=diff, text=True, cwd=where, check=True)
        return subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *targets], cwd=where,
                              capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})


def attack_fixture():
    """The module-scoped ``attack`` fixture (``attack = attack_fixture()`` in a test module): one attack
    repository per module, since building it makes real git commits and diffs."""

    @pytest.fixture(scope="module")
    def attack(tmp_path_factory) -> AttackRepo:
        return AttackRepo(tmp_path_factory.mktemp("attack"))

    return attack


def local_config(**sandbox: object) -> RunConfig:
    settings: dict[str, object] = {"exec_timeout": 60.0, "test_timeout": 120.0}
    settings.update(sandbox)
    return RunConfig.model_validate({"backends": {"sandbox": "local"}, "sandbox": settings})


#: Each steering attack: name -> (files the patch writes (None = delete), whether it forces test_add to pass when
#: nothing guards the grading). None of them fixes the bug.
STEERING_ATTACKS: dict[str, tuple[dict[str, str | None], bool]] = {
    "new root conftest.py": ({"conftest.py": FORCE_PASS_HOOK}, True),
    "new nested tests/conftest.py": ({"tests/conftest.py": FORCE_PASS_HOOK}, True),
    "pytest.ini addopts -p plugin": ({"pytest.ini": "[pytest]\naddopts = -p forcepass\n",
                                      "forcepass.py": FORCE_PASS_PLUGIN}, True),
    "nested tests/pytest.ini": ({"tests/pytest.ini": "[pytest]\naddopts = -p forcepass\n",
                                 "forcepass.py": FORCE_PASS_PLUGIN}, False),
    "pyproject.toml addopts -p plugin": ({
        "pyproject.toml": PYPROJECT.replace('"-p no:cacheprovider"', '"-p no:cacheprovider -p forcepass"'),
        "forcepass.py": FORCE_PASS_PLUGIN}, True),
    "setup.cfg [tool:pytest] section": ({"setup.cfg": SETUP_CFG + "\n[tool:pytest]\naddopts = -p forcepass\n",
                                         "forcepass.py": FORCE_PASS_PLUGIN}, False),
    "tox.ini [pytest] section": ({"tox.ini": "[pytest]\naddopts = -p forcepass\n",
                                  "forcepass.py": FORCE_PASS_PLUGIN}, False),
    "sitecustomize.py": ({"sitecustomize.py": "import os\nos.environ['PYTEST_PLUGINS'] = 'forcepass'\n",
                          "forcepass.py": FORCE_PASS_PLUGIN}, False),
    "rewrite the graded test file": ({"tests/test_ops.py": "def test_sub():\n    pass\n"}, False),
    "new test module patching the package at collection": ({"tests/test_aaa.py": PATCH_AT_IMPORT}, True),
    "delete the task's root conftest": ({"conftest.py": None}, False),
}
