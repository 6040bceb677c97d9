"""`gp data synth` / `gp data mine` end to end: real test runs in local sandboxes, then `gp validate-tasks`'s own
function on what was written (gold patch resolves, empty patch does not)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.config.schema import RunConfig
from graph_planner.data.io import read_task_records
from graph_planner.validation.validate import validate_tasks

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


def _validate(split_file: Path):
    return validate_tasks(read_task_records(split_file), RunConfig(), split_file.parent, backend="local")


@pytest.mark.slow
def test_synth_on_a_bundled_repo_writes_tasks_whose_gold_resolves_and_empty_does_not(tmp_path):
    out = tmp_path / "prepared"
    args = ["data", "synth", "--repo", str(ROOT / "datasets/sample/repos/textkit"), "--out", str(out),
            "--max-tasks", "3", "--seed", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    source = out / "synth"
    records = [r for split in ("train", "val", "test") if (source / f"{split}.jsonl").is_file()
               for r in read_task_records(source / f"{split}.jsonl")]
    assert len(records) == 3
    for record in records:
        assert record.fail_to_pass and record.pass_to_pass and record.gold_patch
        assert record.metadata["synth"]["seed"] == 1 and record.metadata["synth"]["modifier"]
        # symptoms only: the failing tests, never the mutated file or function
        assert record.metadata["synth"]["path"] not in record.problem_statement
        assert record.metadata["synth"]["target"].rsplit(".", 1)[-1] + "(" not in record.problem_statement
        assert record.fail_to_pass[0] in record.problem_statement
        parents = _git(source / "repos" / "textkit", "rev-list", "--parents", "-n", "1", record.base_commit).split()
        assert parents == [record.base_commit]  # a root commit: no parent holds the fix
    locations = {}
    for record in records:
        assert locations.setdefault(record.metadata["location"], record.split) == record.split
    assert json.loads((out / "summary.json").read_text())["sources"]["synth"]["repos"] == ["textkit"]
    for split in {r.split for r in records}:
        report = _validate(source / f"{split}.jsonl")
        assert report.ok, [(t.task_id, t.error) for t in report.failed]


TINY = {
    "calc/__init__.py": "",
    "calc/ops.py": "def add(a, b):\n    return a + b\n\n\ndef double(x):\n    return add(x, x)\n",
}


@pytest.mark.parametrize(("test_text", "message"), [
    ("from calc.ops import add\n\ndef test_add():\n    assert add(1, 2) == 4\n", "tests fail on the clean tree"),
    ("import os\nfrom calc.ops import add\n\ndef test_add():\n    assert os.urandom(1)[0] % 2 == 0\n\n"
     "def test_b():\n    assert os.urandom(1)[0] % 2 == 1\n\ndef test_c():\n    assert os.urandom(1)[0] % 2 == 0\n\n"
     "def test_d():\n    assert os.urandom(1)[0] % 2 == 1\n\ndef test_e():\n    assert os.urandom(1)[0] % 2 == 0\n\n"
     "def test_f():\n    assert os.urandom(1)[0] % 2 == 1\n", "(flaky tests|tests fail on the clean tree)"),
])
def test_failing_or_flaky_suites_exit_2_with_one_line_and_write_nothing(tmp_path, test_text, message):
    repo = _write(tmp_path / "calc", {**TINY, "tests/test_ops.py": test_text})
    out = tmp_path / "prepared"
    result = runner.invoke(app, ["data", "synth", "--repo", str(repo), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert __import__("re").search(message, result.output)
    assert "Traceback" not in result.output
    assert not out.exists()


def test_a_repository_without_tests_exits_2_and_writes_nothing(tmp_path, monkeypatch):
    import tempfile

    repo = _write(tmp_path / "calc", TINY)
    out = tmp_path / "prepared"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    result = runner.invoke(app, ["data", "synth", "--repo", str(repo), "--out", str(out)])
    assert result.exit_code == 2 and "no test file" in result.output
    assert not out.exists()
    assert list(scratch.iterdir()) == []  # the staging dir of the refused run is gone too


@pytest.mark.slow
def test_mine_turns_a_fix_commit_with_tests_into_a_task_that_validates(tmp_path):
    repo = _write(tmp_path / "shop", {
        "shop/__init__.py": "",
        "shop/price.py": "def discount(total, pct):\n    return total - total * pct / 100\n\n\n"
                         "def bulk(qty):\n    return qty > 10\n",
        "tests/test_price.py": "from shop.price import discount\n\n\ndef test_discount():\n"
                               "    assert discount(200, 10) == 180\n",
    })
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "initial")
    (repo / "README.md").write_text("docs\n")  # docs only: not a candidate
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "readme")
    (repo / "shop/price.py").write_text((repo / "shop/price.py").read_text().replace("qty > 10", "qty >= 10"))
    (repo / "tests/test_bulk.py").write_text("from shop.price import bulk\n\n\ndef test_ten_is_bulk():\n"
                                             "    assert bulk(10)\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "Orders of exactly ten items get the bulk price\n\nbulk(10) returned False.")
    fix = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "shop/price.py").write_text((repo / "shop/price.py").read_text().replace(
        "total - total * pct / 100", "total * (100 - pct) / 100"))
    (repo / "tests/test_half.py").write_text("from shop.price import discount\n\n\ndef test_half():\n"
                                             "    assert discount(100, 50) == 50\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "refactor")  # code + tests, but no test fails before it: not a task
    out = tmp_path / "prepared"
    result = runner.invoke(app, ["data", "mine", "--repo", str(repo), "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = read_task_records(out / "mined" / "test.jsonl")
    assert [r.task_id for r in records] == [f"mined__shop-{fix[:10]}"]
    task = records[0]
    assert task.fail_to_pass == ["tests/test_bulk.py::test_ten_is_bulk"]
    assert task.pass_to_pass == ["tests/test_price.py::test_discount"]
    assert task.problem_statement.startswith("Orders of exactly ten items")
    assert task.metadata["problem_statement_from"] == "commit message"
    assert "tests/" not in task.gold_patch and "test_bulk" in (task.test_patch or "")
    rejected = [json.loads(line) for line in (out / "mined" / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == 1 and "no test fails before the fix" in rejected[0]["reason"]
    assert rejected[0]["split"] == "test" and not (out / "mined" / "candidates.jsonl").exists()
    report = _validate(out / "mined" / "test.jsonl")
    assert report.ok, [(t.task_id, t.error) for t in report.failed]


@pytest.mark.slow
def test_prepare_runs_the_synth_source_from_the_config(tmp_path):
    """data.synth_repos makes `gp data prepare` (and the Prefect data step) write <out>/synth like the CLI."""
    import graph_planner.synth  # noqa: F401 -- registers the source, as the gp command does
    from graph_planner.config.schema import DataConfig
    from graph_planner.data.prepare import prepare_datasets

    repo = _write(tmp_path / "calc", {**TINY, "tests/test_ops.py": (
        "from calc.ops import add, double\n\ndef test_add():\n    assert add(1, 2) == 3\n\n"
        "def test_double():\n    assert double(4) == 8\n")})
    data = DataConfig(skip_r2e=True, skip_swebench=True, synth_repos=[str(repo)], synth_max_tasks=1)
    summary = prepare_datasets(data, out_dir=tmp_path / "prepared")
    assert summary.total_kept == 1
    (split,) = [s for s, c in summary.sources["synth"].splits.items() if c.kept]
    (record,) = read_task_records(summary.split_path("synth", split))
    assert record.source == "synth" and record.fail_to_pass
    assert (tmp_path / "prepared" / "synth" / "repos" / "calc" / ".git").is_dir()


def test_candidates_on_lines_no_test_runs_are_dropped_before_validation(tmp_path):
    """The traced clean run sees which lines run; a bug in code no test executes could fail nothing."""
    from graph_planner.config.schema import SandboxConfig
    from graph_planner.sandbox.local import LocalSandbox
    from graph_planner.synth.coverage import executed_lines
    from graph_planner.synth.synth import plan_candidates
    from graph_planner.synth.validate import clean_task

    repo = _write(tmp_path / "calc", {
        "calc/__init__.py": "",
        "calc/ops.py": "def add(a, b):\n    return a + b\n\n\ndef unused(a, b):\n    if a > b:\n        return a - b\n"
                       "    return b - a\n",
        "tests/test_ops.py": "from calc.ops import add, unused\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
                             "def test_never():\n    if add(1, 1) == 3:\n        assert unused(2, 1) == 1\n",
    })
    with LocalSandbox(clean_task(repo, "calc"), SandboxConfig(), None, "test-cov") as box:
        executed = executed_lines(box, 120)
    assert executed is not None
    assert 2 in executed["calc/ops.py"] and 6 not in executed["calc/ops.py"]
    everything, _ = plan_candidates(repo, "calc", 0, 10)
    kept, _ = plan_candidates(repo, "calc", 0, 10, executed)
    assert {m.target for m in everything} == {"fn:calc/ops.py::add", "fn:calc/ops.py::unused"}
    assert {m.target for m in kept} == {"fn:calc/ops.py::add"}


@pytest.mark.slow
def test_synth_reads_a_git_checkout_from_its_tracked_files(tmp_path):
    """A git repository: only tracked files go into the task repository (an ignored build file never does), and
    the task validates."""
    repo = _write(tmp_path / "calc", {**TINY, ".gitignore": "build/\n", "build/junk.py": "X = 1\n",
                                      "tests/test_ops.py": "from calc.ops import add, double\n\ndef test_add():\n"
                                      "    assert add(1, 2) == 3\n\ndef test_double():\n    assert double(4) == 8\n"})
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "initial")
    out = tmp_path / "prepared"
    result = runner.invoke(app, ["data", "synth", "--repo", str(repo), "--out", str(out), "--max-tasks", "1"])
    assert result.exit_code == 0, result.output
    (split,) = [s for s in ("train", "val", "test") if (out / "synth" / f"{s}.jsonl").is_file()]
    (record,) = read_task_records(out / "synth" / f"{split}.jsonl")
    files = _git(out / "synth" / "repos" / "calc", "ls-tree", "-r", "--name-only", record.base_commit).split()
    assert "build/junk.py" not in files and "calc/ops.py" in files
    report = _validate(out / "synth" / f"{split}.jsonl")
    assert report.ok, [(t.task_id, t.error) for t in report.failed]


@pytest.mark.slow
def test_mine_discards_a_fix_whose_tests_are_flaky_before_it(tmp_path):
    """Tests that pass after the fix but flip at random before it: one run before would make the losers
    FAIL_TO_PASS; two runs that differ discard the commit."""
    repo = _write(tmp_path / "shop", {
        "shop/__init__.py": "",
        "shop/price.py": "def bulk(qty):\n    return qty > 10\n",
        "tests/test_price.py": "from shop.price import bulk\n\n\ndef test_big():\n    assert bulk(20)\n",
    })
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "initial")
    (repo / "shop/price.py").write_text("def bulk(qty):\n    return qty >= 10\n")
    coins = "".join(f"\ndef test_ten_{i}():\n    assert bulk(10) or os.urandom(1)[0] % 2 == 0\n" for i in range(12))
    (repo / "tests/test_bulk.py").write_text("import os\n\nfrom shop.price import bulk\n" + coins)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "Ten items are bulk")
    out = tmp_path / "prepared"
    result = runner.invoke(app, ["data", "mine", "--repo", str(repo), "--out", str(out)])
    assert result.exit_code == 1, result.output  # nothing mined, nothing written
    assert "flaky: two runs before the fix differ" in result.output
    assert not out.exists()
