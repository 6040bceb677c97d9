"""Build the bundled sample rows from ``tasks.yaml`` + ``repos/``, in the exact Hugging Face schemas.

Writes ``swebench/test.jsonl`` (SWE-bench Verified columns, all strings) and ``r2e/train.jsonl`` (R2E-Gym-Lite
columns), each with a dataset card declaring the Hub's feature types. Everything is deterministic (fixed git
identity and date, stable key order, normalised test logs), so running it again reproduces the files
byte-for-byte; ``--check`` verifies that instead of writing.

    python datasets/sample/build_rows.py [--out-dir DIR] [--check]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator
from swebench.harness.log_parsers import parse_log_pytest
from unidiff import PatchSet

from graph_planner.data.gitrepo import COMMIT_DATE, apply_patch, commit_all, init_deterministic_repo

SAMPLE_DIR = Path(__file__).resolve().parent
TASKS_FILE = SAMPLE_DIR / "tasks.yaml"
REPOS_DIR = SAMPLE_DIR / "repos"
SWEBENCH_FILE = Path("swebench") / "test.jsonl"
R2E_FILE = Path("r2e") / "train.jsonl"

SWEBENCH_COLUMNS = (
    "repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
    "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit", "difficulty",
)
R2E_COLUMNS = (
    "repo_name", "docker_image", "commit_hash", "parsed_commit_content", "execution_result_content",
    "modified_files", "modified_entity_summaries", "relevant_files", "num_non_test_files",
    "num_non_test_func_methods", "num_non_test_lines", "prompt", "problem_statement", "expected_output_json",
)
#: Hub feature types; written into each directory's dataset card so ``load_dataset(<dir>)`` gives exactly these
#: (plain ``load_dataset("json", ...)`` would infer ``created_at`` as a timestamp).
_ENTITY_FIELDS = (("ast_type_str", "string"), ("end_lineno", "int64"), ("file_name", "string"), ("name", "string"),
                  ("start_lineno", "int64"), ("type", "string"))
R2E_FEATURES = {
    **{name: "string" for name in R2E_COLUMNS},
    "modified_files": ["string"], "relevant_files": ["string"], "modified_entity_summaries": [dict(_ENTITY_FIELDS)],
    "num_non_test_files": "int64", "num_non_test_func_methods": "int64", "num_non_test_lines": "int64",
}
SWEBENCH_FEATURES = {name: "string" for name in SWEBENCH_COLUMNS}
#: Hidden tests go to this directory at the repo root and run with ``python -m pytest -rA r2e_tests``, as
#: R2E images' run_tests.sh does (plus: no header, no cache, so logs do not depend on the machine).
R2E_TESTS_DIR = "r2e_tests"
PYTEST_ARGS = ("-m", "pytest", "-rA", "--no-header", "-p", "no:cacheprovider")
_COPY_IGNORE = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc", R2E_TESTS_DIR)
_DURATION = re.compile(r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+>")


class RepoSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str = Field(description="SWE-bench `version` of every task of this repo.")
    description: str


class SampleTask(BaseModel):
    """One entry of tasks.yaml."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(pattern=r"^[\w.-]+__[\w.-]+-\d+$")
    repo: str
    created_at: str
    difficulty: str
    commit_message: str
    title: str
    body: str
    hints_text: str = ""
    gold_patch: str
    test_patch: str
    FAIL_TO_PASS: list[str] = Field(min_length=1)
    PASS_TO_PASS: list[str] = Field(min_length=3)
    r2e_tests: list[str] = Field(min_length=1, description="Test files (after test_patch) hidden as test_1.py...")

    @property
    def swebench_statement(self) -> str:
        return f"{self.title}\n\n{self.body.strip()}\n"

    @property
    def r2e_statement(self) -> str:
        return f"[ISSUE]\n**Title:** {self.title}\n\n{self.body.strip()}\n[/ISSUE]"


class SampleSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    owner: str
    repos: dict[str, RepoSpec]
    tasks: list[SampleTask]

    @model_validator(mode="after")
    def _consistent(self) -> SampleSet:
        seen: set[str] = set()
        for task in self.tasks:
            if task.repo not in self.repos:
                raise ValueError(f"task {task.task_id}: repo {task.repo!r} is not listed under `repos`")
            if not task.task_id.startswith(f"{self.owner}__{task.repo}-"):
                raise ValueError(f"task {task.task_id}: id must look like {self.owner}__{task.repo}-<n>")
            if task.task_id in seen:
                raise ValueError(f"task {task.task_id} appears twice in tasks.yaml")
            seen.add(task.task_id)
        return self


def load_sample_set(path: Path = TASKS_FILE) -> SampleSet:
    return SampleSet.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def copy_repo(name: str, dest: Path) -> Path:
    """Copy repos/<name> to ``dest`` (which must not exist), leaving caches and hidden tests behind."""
    source = REPOS_DIR / name
    if not source.is_dir():
        raise FileNotFoundError(f"sample repo {source} does not exist (named in {TASKS_FILE})")
    shutil.copytree(source, dest, ignore=_COPY_IGNORE)
    return dest


def base_commit_of(repo_dir: str | Path) -> str:
    """The deterministic commit of a repo tree, made in a temporary copy (``repo_dir`` is left untouched)."""
    with tempfile.TemporaryDirectory(prefix="gp-sample-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(repo_dir, copy, ignore=_COPY_IGNORE)
        return init_deterministic_repo(copy)


@dataclass
class PytestRun:
    rc: int
    stdout: str
    stderr: str


def run_pytest(repo: Path, *targets: str, timeout: float = 300) -> PytestRun:
    """``python -m pytest -rA`` in ``repo``.

    The log is normalised so rows regenerate byte-for-byte: the checkout path becomes ``/testbed``, pytest's
    temp dir ``/tmp/pytest``, durations ``0.00s`` and object addresses ``0x0``.
    """
    basetemp = repo.parent / "pytest-tmp"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               COLUMNS="120", NO_COLOR="1")
    for name in ("CI", "BUILD_NUMBER"):  # pytest prints untruncated assertion diffs under CI: logs would differ
        env.pop(name, None)
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):  # the caller's pytest options (--junitxml, --durations...)
        env.pop(name, None)
    command = [sys.executable, *PYTEST_ARGS, f"--basetemp={basetemp}", *targets]
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout, check=False)

    def clean(text: str) -> str:
        text = text.replace(str(basetemp), "/tmp/pytest").replace(str(repo), "/testbed")
        return _ADDRESS.sub(" at 0x0>", _DURATION.sub(" in 0.00s", text))

    return PytestRun(done.returncode, clean(done.stdout), clean(done.stderr))


def r2e_key(node_id: str) -> str:
    """R2E test key: the node id without its file path, remaining parts joined by dots (Class.test_method)."""
    return ".".join(node_id.split("::")[1:])


def r2e_statuses(log: str) -> dict[str, str]:
    """Statuses of an ``-rA`` log (swebench's pytest parser), keyed the R2E way."""
    return {r2e_key(node): status for node, status in parse_log_pytest(log, None).items() if "::" in node}


# ---------------------------------------------------------------------------------------------------------------
# ParsedCommit (R2E-Gym's commit model), serialised as R2E does: pydantic JSON with indent=4.


def is_test_path(path: str) -> bool:
    """R2E-Gym's FileDiff.is_test_file rule."""
    parts = path.split("/")
    return (path.endswith("_test.py") or parts[-1].startswith("test_")
            or bool({"tests", "Tests", "test", "Test"} & set(parts)))


def _entities(path: str, source: str) -> dict[tuple[str, str], dict]:
    """Top-level functions, classes and methods (``Class.method``) of a file, keyed by (type, name)."""
    if not source:
        return {}
    found: dict[tuple[str, str], dict] = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            entity = {"file_name": path, "type": kind, "name": node.name,
                      "content": ast.get_source_segment(source, node), "ast_type_str": type(node).__name__,
                      "start_lineno": node.lineno, "end_lineno": node.end_lineno, "parent": None}
            found[(kind, node.name)] = entity
            if kind == "class":
                for child in node.body:
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        name = f"{node.name}.{child.name}"
                        found[("method", name)] = {
                            **entity, "type": "method", "name": name,
                            "content": ast.get_source_segment(source, child), "ast_type_str": type(child).__name__,
                            "start_lineno": child.lineno, "end_lineno": child.end_lineno, "parent": entity}
    return found


def _touching(entities: dict[tuple[str, str], dict], lines: set[int]) -> set[tuple[str, str]]:
    return {key for key, e in entities.items() if any(e["start_lineno"] <= n <= e["end_lineno"] for n in lines)}


def _sorted_entities(entities: list[dict]) -> list[dict]:
    return sorted(entities, key=lambda e: (e["file_name"], e["start_lineno"], e["type"], e["name"]))


def file_diffs(patch: str, old_tree: Path, new_tree: Path) -> list[dict]:
    """R2E FileDiff dicts for every file of ``patch`` (contents read from the two trees)."""
    headers = iter(line for line in patch.splitlines() if line.startswith("@@ "))
    diffs = []
    for patched in PatchSet(patch):
        path = patched.path
        old = "" if patched.is_added_file else (old_tree / path).read_text(encoding="utf-8")
        new = "" if patched.is_removed_file else (new_tree / path).read_text(encoding="utf-8")
        old_entities, new_entities = _entities(path, old), _entities(path, new)
        info = [line for line in patched.patch_info if line.strip()]
        misc = [line.rstrip("\n") for line in info[1:] if not line.startswith("index ")]
        index = next(line.split() for line in info if line.startswith("index "))
        old_hash, new_hash = index[1].split("..")
        hunks = []
        for hunk in patched:
            header = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)", next(headers))
            assert header is not None
            o_start, o_len, n_start, n_len, section = header.groups()
            lines = [{"content": line.value.rstrip("\n"),
                      "type": {" ": "context", "+": "added", "-": "deleted"}[line.line_type]} for line in hunk]
            before = {ln.source_line_no for ln in hunk if ln.is_removed}
            after = {ln.target_line_no for ln in hunk if ln.is_added}
            touched_before, touched_after = _touching(old_entities, before), _touching(new_entities, after)
            hunks.append({
                "descriptor": {
                    "old_range": {"start": int(o_start), "length": None if o_len is None else int(o_len)},
                    "new_range": {"start": int(n_start), "length": None if n_len is None else int(n_len)},
                    "section": section,
                },
                "line_group": {"all_lines": lines},
                "modified_entities": _sorted_entities(
                    [old_entities[k] for k in (touched_before | touched_after) if k in old_entities
                     and k in new_entities]),
                "added_entities": _sorted_entities(
                    [new_entities[k] for k in touched_after if k not in old_entities]),
                "deleted_entities": _sorted_entities(
                    [old_entities[k] for k in touched_before if k not in new_entities]),
            })
        diffs.append({
            "old_file_content": old,
            "new_file_content": new,
            "header": {"file": {"path": path}, "misc_line": "\n".join(misc) or None},
            "index_line": {"old_commit_hash": old_hash, "new_commit_hash": new_hash,
                           "mode": index[2] if len(index) > 2 else ""},
            "is_binary_file": False,
            "binary_line": None,
            "minus_file": {"path": patched.source_file},
            "plus_file": {"path": patched.target_file},
            "hunks": hunks,
        })
    return diffs


def patch_from_file_diffs(diffs: list[dict], *, tests: bool) -> str:
    """Rebuild a unified diff from R2E FileDiff dicts: non-test python files (the gold patch) or test files."""
    out = []
    for diff in diffs:
        path = diff["header"]["file"]["path"]
        if not path.endswith(".py") or is_test_path(path) != tests:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
        if diff["header"]["misc_line"]:
            out.append(diff["header"]["misc_line"] + "\n")
        index = diff["index_line"]
        out.append(f"index {index['old_commit_hash']}..{index['new_commit_hash']}"
                   f"{' ' if index['mode'] else ''}{index['mode']}\n")
        out.append(f"--- {diff['minus_file']['path']}\n+++ {diff['plus_file']['path']}\n")
        for hunk in diff["hunks"]:
            ranges = hunk["descriptor"]
            spans = [f"{r['start']}" + ("" if r["length"] is None else f",{r['length']}")
                     for r in (ranges["old_range"], ranges["new_range"])]
            out.append(f"@@ -{spans[0]} +{spans[1]} @@" + (f" {ranges['section']}" if ranges["section"] else "") + "\n")
            marks = {"context": " ", "added": "+", "deleted": "-"}
            out.extend(f"{marks[line['type']]}{line['content']}\n" for line in hunk["line_group"]["all_lines"])
    return "".join(out)


# ---------------------------------------------------------------------------------------------------------------
# Rows


@dataclass
class TaskBuild:
    """Everything derived from one task by checking it out and running its hidden tests."""

    base_commit: str
    fix_commit: str
    diffs: list[dict]
    test_names: list[str]
    test_codes: list[str]
    old_run: PytestRun
    new_run: PytestRun


def _write_hidden_tests(repo: Path, codes: list[str]) -> None:
    hidden = repo / R2E_TESTS_DIR
    hidden.mkdir()
    for number, code in enumerate(codes, start=1):
        (hidden / f"test_{number}.py").write_text(code, encoding="utf-8")


def build_task(task: SampleTask, workdir: Path) -> TaskBuild:
    """Check out base and fix trees of ``task`` under ``workdir`` and run the hidden tests on both."""
    old = copy_repo(task.repo, workdir / "old" / task.repo)
    base = init_deterministic_repo(old)
    new = copy_repo(task.repo, workdir / "new" / task.repo)
    init_deterministic_repo(new)
    apply_patch(new, task.gold_patch)
    apply_patch(new, task.test_patch)
    fix = commit_all(new, task.commit_message)
    diffs = file_diffs(task.gold_patch, old, new) + file_diffs(task.test_patch, old, new)
    codes = [(new / path).read_text(encoding="utf-8") for path in task.r2e_tests]
    names = [f"test_{number}.py" for number in range(1, len(codes) + 1)]
    for tree in (old, new):
        _write_hidden_tests(tree, codes)
    return TaskBuild(base, fix, diffs, names, codes, run_pytest(old, R2E_TESTS_DIR), run_pytest(new, R2E_TESTS_DIR))


def swebench_row(sample: SampleSet, task: SampleTask, built: TaskBuild) -> dict[str, str]:
    return {
        "repo": f"{sample.owner}/{task.repo}",
        "instance_id": task.task_id,
        "base_commit": built.base_commit,
        "patch": task.gold_patch,
        "test_patch": task.test_patch,
        "problem_statement": task.swebench_statement,
        "hints_text": task.hints_text,
        "created_at": task.created_at,
        "version": sample.repos[task.repo].version,
        "FAIL_TO_PASS": json.dumps(task.FAIL_TO_PASS),
        "PASS_TO_PASS": json.dumps(task.PASS_TO_PASS),
        "environment_setup_commit": built.base_commit,
        "difficulty": task.difficulty,
    }


def _tail(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else "[TRUNCATED]\n\n" + text[-limit:]


def _synthesis_prompt(task: SampleTask, built: TaskBuild, improved: list[str]) -> str:
    """The prompt an R2E-style pipeline would give an LLM to write the issue (kept for schema fidelity)."""
    return (
        "You write GitHub issues from commits. Given the commit below and the test results before and after it, "
        "write a concise, realistic issue in [ISSUE] [/ISSUE] tags: a title, a short reproducer without "
        "assertions, the actual and the expected behaviour. Do not reveal the fix and do not mention tests.\n\n"
        f"Commit {built.fix_commit}: {task.commit_message}\n\n"
        f"Patch (non-test files):\n```diff\n{task.gold_patch}```\n\n"
        f"Tests added or changed:\n```diff\n{task.test_patch}```\n\n"
        f"Test run on the old commit:\n{_tail(built.old_run.stdout)}\n\n"
        f"Test run on the new commit:\n{_tail(built.new_run.stdout)}\n\n"
        "Tests that fail on the old commit and pass on the new one:\n" + "\n".join(improved) + "\n"
    )


def r2e_row(task: SampleTask, built: TaskBuild) -> dict:
    expected = r2e_statuses(built.new_run.stdout)
    before = r2e_statuses(built.old_run.stdout)
    improved = [key for key, status in expected.items() if status == "PASSED" and before.get(key) != "PASSED"]
    parsed_commit = {
        "file_diffs": built.diffs,
        "old_commit_hash": built.base_commit,
        "new_commit_hash": built.fix_commit,
        "commit_message": task.commit_message,
        "commit_date": COMMIT_DATE,
        "metadata": {"instance_id": task.task_id, "created_at": task.created_at},
    }
    execution_result = {
        "repo_name": task.repo,
        "new_commit_hash": built.fix_commit,
        "test_file_codes": built.test_codes,
        "test_file_names": built.test_names,
        "setup_res_code": 0,
        "setup_res_stdout": "",
        "setup_res_stderr": "",
        "new_commit_res_code": built.new_run.rc,
        "new_commit_res_stdout": built.new_run.stdout,
        "new_commit_res_stderr": built.new_run.stderr,
        "old_commit_res_code": built.old_run.rc,
        "old_commit_res_stdout": built.old_run.stdout,
        "old_commit_res_stderr": built.old_run.stderr,
    }
    entities: dict[tuple[str, str, str], dict] = {}
    for diff in built.diffs:
        for hunk in diff["hunks"]:
            for kind in ("modified_entities", "added_entities", "deleted_entities"):
                for e in hunk[kind]:
                    entities.setdefault((e["file_name"], e["type"], e["name"]), e)
    summaries = [{k: e[k] for k in ("ast_type_str", "end_lineno", "file_name", "name", "start_lineno", "type")}
                 for e in _sorted_entities(list(entities.values()))]
    non_test = [d for d in built.diffs if not is_test_path(d["header"]["file"]["path"])]
    non_test_paths = [d["header"]["file"]["path"] for d in non_test]
    return {
        "repo_name": task.repo,
        "docker_image": f"graph-planner/sample-{task.repo}:{built.fix_commit[:12]}",
        "commit_hash": built.fix_commit,
        "parsed_commit_content": json.dumps(parsed_commit, indent=4, ensure_ascii=False),
        "execution_result_content": json.dumps(execution_result, indent=4, ensure_ascii=False),
        "modified_files": [d["header"]["file"]["path"] for d in built.diffs],
        "modified_entity_summaries": summaries,
        "relevant_files": non_test_paths,
        "num_non_test_files": len(non_test),
        "num_non_test_func_methods": sum(1 for (path, kind, _name) in entities
                                         if path in non_test_paths and kind in ("function", "method")),
        "num_non_test_lines": sum(line["type"] != "context" for d in non_test for h in d["hunks"]
                                  for line in h["line_group"]["all_lines"]),
        "prompt": _synthesis_prompt(task, built, improved),
        "problem_statement": task.r2e_statement,
        "expected_output_json": json.dumps(expected, indent=4),
    }


def _check_task(task: SampleTask, built: TaskBuild) -> None:
    """Refuse rows whose hidden tests do not tell the buggy and the fixed commit apart."""
    before, after = r2e_statuses(built.old_run.stdout), r2e_statuses(built.new_run.stdout)
    if len(after) != len(parse_log_pytest(built.new_run.stdout, None)):
        raise RuntimeError(f"{task.task_id}: two hidden tests share a name; R2E keys drop the file path")
    if not after or set(before) != set(after):
        raise RuntimeError(f"{task.task_id}: hidden tests collected differently before/after the fix:\n"
                           f"{built.old_run.stdout}\n{built.new_run.stdout}")
    if any(status != "PASSED" for status in after.values()) or before == after:
        raise RuntimeError(f"{task.task_id}: hidden tests must all pass on the fix and some fail before it; "
                           f"before={before} after={after}")


def dataset_card(split: str, data_file: str, features: dict, title: str) -> str:
    """README.md with the Hub's ``configs`` / ``dataset_info`` YAML, so the directory loads like the Hub dataset."""
    lines = ["---", "configs:", "- config_name: default", "  data_files:", f"  - split: {split}",
             f"    path: {data_file}", "dataset_info:", "  features:"]
    for name, kind in features.items():
        lines.append(f"  - name: {name}")
        if isinstance(kind, str):
            lines.append(f"    dtype: {kind}")
        elif isinstance(kind[0], str):
            lines.append(f"    list: {kind[0]}")
        else:
            lines.append("    list:")
            for field, dtype in kind[0].items():
                lines += [f"    - name: {field}", f"      dtype: {dtype}"]
    lines += ["---", "", f"# {title}", "",
              "Generated by `datasets/sample/build_rows.py` from `datasets/sample/tasks.yaml`; do not edit by hand.",
              ""]
    return "\n".join(lines)


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rows)


def render_rows(tasks_file: Path = TASKS_FILE) -> dict[Path, str]:
    """Contents of both row files (relative path -> text), built in a temporary directory."""
    sample = load_sample_set(tasks_file)
    # Tasks are independent checkouts; test runs dominate, so run them on every core.
    with tempfile.TemporaryDirectory(prefix="gp-sample-rows-") as tmp, \
            ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        builds = list(pool.map(lambda n: build_task(sample.tasks[n], Path(tmp) / str(n)), range(len(sample.tasks))))
    for task, built in zip(sample.tasks, builds):
        _check_task(task, built)
    swebench_rows = [swebench_row(sample, task, built) for task, built in zip(sample.tasks, builds)]
    r2e_rows = [r2e_row(task, built) for task, built in zip(sample.tasks, builds)]
    return {
        SWEBENCH_FILE: _jsonl(swebench_rows),
        SWEBENCH_FILE.parent / "README.md": dataset_card(
            "test", SWEBENCH_FILE.name, SWEBENCH_FEATURES, "Graph Planner sample tasks, SWE-bench Verified columns"),
        R2E_FILE: _jsonl(r2e_rows),
        R2E_FILE.parent / "README.md": dataset_card(
            "train", R2E_FILE.name, R2E_FEATURES, "Graph Planner sample tasks, R2E-Gym-Lite columns"),
    }


def build_rows(out_dir: str | Path = SAMPLE_DIR, tasks_file: Path = TASKS_FILE) -> dict[str, Path]:
    """Write ``swebench/`` and ``r2e/`` (rows + dataset card) under ``out_dir``; return the two row files by name."""
    for relative, text in render_rows(tasks_file).items():
        path = Path(out_dir) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return {"swebench": Path(out_dir) / SWEBENCH_FILE, "r2e": Path(out_dir) / R2E_FILE}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=SAMPLE_DIR, help="where swebench/ and r2e/ go")
    parser.add_argument("--check", action="store_true", help="compare with the files in --out-dir, write nothing")
    args = parser.parse_args(argv)
    if not args.check:
        for name, path in build_rows(args.out_dir).items():
            print(f"{name}: {path}")
        return 0
    stale = [str(args.out_dir / rel) for rel, text in render_rows().items()
             if not (args.out_dir / rel).is_file() or (args.out_dir / rel).read_text(encoding="utf-8") != text]
    if stale:
        print("out of date (run datasets/sample/build_rows.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    print("sample rows are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
