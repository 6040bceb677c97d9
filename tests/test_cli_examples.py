"""Every example `gp ... --help` prints runs as typed, on the bundled samples, in a fresh workspace (a temp dir
holding links to the repo's configs/, datasets/ and docker/, nothing prepared): no example may name a missing path
or put its arguments in the wrong order (`gp graph find datasets/sample/repos/calc 'add numbers'` did both).

An example runs after the examples whose outputs it reads (`NEEDS`), as a user following the help would run them.
Docker examples build the sample images themselves through `gp images build prepared/sample` (an example too):
CI's Docker engine starts empty, and an image that only exists on a developer's machine must not make one pass.
The only inputs a user brings are made here: `preds.jsonl` (predictions to grade; the gold patches of two sample
tasks) and `../mylib` (a library with git history: the textkit sample, a docs commit, then its issue-7 fix with a
test, the kind of commit `gp data mine` turns into a task). `gp serve` examples run until their /health answers and
are then stopped; their port is swapped for a free one.

The two longest examples that read only the prepared data (`gp train` and `gp sft`: a GRPO step and SFT epochs of
the toy) start in the background as soon as `gp data prepare` has run, when the session selected them or an
example that needs them; their tests then wait for them. They write only their own run dirs, so they run beside
the others' image builds, sandboxes and servers, as two users' commands in one workspace would.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from docker_fixtures import base_image, docker_client, free_port  # noqa: F401 - pytest fixtures

from graph_planner.cli_help import EXAMPLES

REPO = Path(__file__).resolve().parents[1]
GP = str(Path(sys.executable).with_name("gp"))
LINKED = ("configs", "datasets", "docker")
EXAMPLE_TIMEOUT_S = 1200

ALL = [(path, i, line) for path, lines in EXAMPLES.items() for i, line in enumerate(lines)]


def ex(path: str, index: int = 0) -> str:
    return EXAMPLES[path][index]


PREPARE = ex("data prepare")
IMAGES = ex("images build")
TRAIN = ex("train")
NIGHTLY_EVAL = ex("eval", 1)
GRAPH = ex("graph build")

#: Examples run first because the example reads what they write (its own prerequisites first, recursively).
NEEDS: dict[str, list[str]] = {
    ex("validate-tasks"): [PREPARE],
    ex("validate-tasks", 1): [PREPARE, IMAGES],
    ex("grade"): [PREPARE, "preds.jsonl"],
    ex("grade", 1): [PREPARE, IMAGES, "preds.jsonl"],
    ex("data register"): [PREPARE],
    ex("data manifest"): [PREPARE],
    IMAGES: [PREPARE],
    ex("images prepull"): [PREPARE, IMAGES],
    ex("smoke", 1): [IMAGES],
    NIGHTLY_EVAL: [TRAIN, PREPARE, IMAGES],
    ex("sft", 1): [ex("eval")],  # the rule policy's episodes: the toy's random ones hold no action to imitate
    ex("graph find", 1): [GRAPH],
    ex("graph expand"): [GRAPH],
}
for _path, _i, _line in ALL:
    if _path.startswith("data ") and "../mylib" in _line:
        NEEDS.setdefault(_line, []).append("../mylib")

#: Examples started in the background once `gp data prepare` ran (they read nothing else and nothing else reads
#: what they write until its own test, or eval-1's, waits for them).
EARLY = (TRAIN, ex("sft"))

#: Quick examples (no data, no model): the rest are slow.
FAST = {ex("config"), ex("config", 1), ex("preflight"), GRAPH, ex("graph find"), ex("graph find", 1),
        ex("graph expand"), ex("graph read"), ex("sandbox reap"), ex("sandbox reap", 1)}


def uses_docker(line: str) -> bool:
    return "--sandbox docker" in line or line.startswith(("gp images", "gp smoke --sandbox docker")) or any(
        uses_docker(need) for need in NEEDS.get(line, []) if need.startswith("gp "))


class Workspace:
    """A fresh directory a user would run the examples in; each example (and input file) is made once."""

    def __init__(self, root: Path, early: tuple[str, ...] = ()) -> None:
        self.root = root
        self.done: dict[str, subprocess.CompletedProcess[str]] = {}
        self.early = early  # started in the background once PREPARE has run
        self.background: dict[str, subprocess.Popen[str]] = {}
        root.mkdir(parents=True, exist_ok=True)
        for name in LINKED:
            (root / name).symlink_to(REPO / name)
        cache = REPO / ".cache" / "graph_planner"  # the toy checkpoint is built once per machine, not per test
        cache.mkdir(parents=True, exist_ok=True)
        (root / ".cache").mkdir()
        (root / ".cache" / "graph_planner").symlink_to(cache)
        self.env = {**os.environ, "PATH": f"{Path(GP).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "COLUMNS": "160"}

    def ensure(self, line: str) -> None:
        for need in NEEDS.get(line, []):
            if need not in self.done:
                self.ensure(need)
                self.done[need] = self._make(need)
                assert self.done[need].returncode == 0, f"prerequisite {need!r} failed:\n{self.tail(need)}"

    def _make(self, need: str) -> subprocess.CompletedProcess[str]:
        if need == "preds.jsonl":
            rows = [json.loads(x) for x in (self.root / "prepared/sample/swebench/test.jsonl").read_text().splitlines()]
            preds = [{"instance_id": r["task_id"], "model_name_or_path": "gold", "model_patch": r["gold_patch"]}
                     for r in rows[:2]]
            (self.root / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
            return subprocess.CompletedProcess([need], 0, "", "")
        if need == "../mylib":
            return self._library(self.root.parent / "mylib")
        return self.run(need)

    def _library(self, lib: Path) -> subprocess.CompletedProcess[str]:
        """The textkit sample as a user's library with history: an initial commit, a docs commit and a fix."""
        if not lib.exists():
            shutil.copytree(REPO / "datasets/sample/repos/textkit", lib)
            git = ["git", "-C", str(lib), "-c", "user.name=gp", "-c", "user.email=gp@example.com"]
            subprocess.run([*git, "init", "-q"], check=True)
            subprocess.run([*git, "add", "-A"], check=True)
            subprocess.run([*git, "commit", "-qm", "initial"], check=True)
            readme = lib / "README.md"
            readme.write_text(readme.read_text() + "\nSee the tests.\n" if readme.exists() else "textkit\n")
            subprocess.run([*git, "commit", "-qam", "docs"], check=True)
            # a fix with its test, as `gp data mine` looks for: the bundled textkit-7 gold + test patches
            task = next(t for t in yaml.safe_load((REPO / "datasets/sample/tasks.yaml").read_text())["tasks"]
                        if t["task_id"].endswith("textkit-7"))
            for patch in (task["gold_patch"], task["test_patch"]):
                subprocess.run([*git, "apply", "-"], input=patch, text=True, check=True)
            subprocess.run([*git, "add", "-A"], check=True)
            subprocess.run([*git, "commit", "-qm", task["commit_message"]], check=True)
        return subprocess.CompletedProcess(["../mylib"], 0, "", "")

    def _words(self, line: str) -> list[str]:
        words = shlex.split(line)
        words[0] = GP
        return words

    def _log(self, line: str) -> Path:
        return self.root.parent / f"background-{EARLY.index(line)}"  # beside the workspace: not a user's file

    def start(self, line: str) -> None:
        """Run ``line`` in the background (its output in files: no pipe to fill up); ``run`` waits for it."""
        if line in self.done or line in self.background:
            return
        with open(f"{self._log(line)}.out", "w") as out, open(f"{self._log(line)}.err", "w") as err:
            self.background[line] = subprocess.Popen(self._words(line), cwd=self.root, env=self.env, stdout=out,
                                                     stderr=err, text=True, stdin=subprocess.DEVNULL)

    def run(self, line: str) -> subprocess.CompletedProcess[str]:
        if line in self.done:
            return self.done[line]
        if line in self.background:
            process = self.background[line]
            process.wait(timeout=EXAMPLE_TIMEOUT_S)
            del self.background[line]
            log = self._log(line)
            result = subprocess.CompletedProcess(process.args, process.returncode,
                                                 Path(f"{log}.out").read_text(), Path(f"{log}.err").read_text())
        else:
            result = subprocess.run(self._words(line), cwd=self.root, env=self.env, capture_output=True, text=True,
                                    timeout=EXAMPLE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        self.done[line] = result
        if line == PREPARE and result.returncode == 0:
            for early in self.early:
                self.start(early)
        return result

    def stop(self) -> None:
        """Background examples whose test did not run (deselected after a failure, or interrupted)."""
        for process in self.background.values():
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def tail(self, line: str) -> str:
        result = self.done[line]
        return (result.stdout + result.stderr)[-3000:]

    def serve(self, line: str) -> None:
        """Start the server as typed (on a free port), wait for /health, check the served name, stop it."""
        words = self._words(line)
        port = free_port()
        words[words.index("--port") + 1] = str(port)
        log = (self.root / f"serve-{port}.log").open("w")
        process = subprocess.Popen(words, cwd=self.root, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 300
            while True:
                assert process.poll() is None, f"{line!r} exited {process.returncode}:\n" \
                    f"{(self.root / f'serve-{port}.log').read_text()[-3000:]}"
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, f"{line!r}: /health did not answer within 300 s"
                time.sleep(0.5)
            name = words[words.index("--served-model-name") + 1] if "--served-model-name" in words else "toy"
            assert httpx.get(f"http://127.0.0.1:{port}/v1/models").json()["data"][0]["id"] == name
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()


def _needs(line: str) -> set[str]:
    """``line`` and every example it needs, recursively."""
    return {line}.union(*(_needs(need) for need in NEEDS.get(line, [])))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Workspace]:
    selected = {item.callspec.params["line"] for item in request.session.items
                if item.nodeid.split("::")[0] == request.node.nodeid and hasattr(item, "callspec")}
    wanted = set().union(*(_needs(line) for line in selected))
    workspace = Workspace(tmp_path_factory.mktemp("examples") / "work", tuple(e for e in EARLY if e in wanted))
    yield workspace
    workspace.stop()


def _marks(line: str) -> list[pytest.MarkDecorator]:
    marks = [] if line in FAST else [pytest.mark.slow]
    if uses_docker(line):
        marks.append(pytest.mark.docker)
    return marks


def test_every_example_is_in_the_table() -> None:
    """The table below is EXAMPLES itself: every example a help page shows is parametrised here."""
    assert len(ALL) == sum(len(lines) for lines in EXAMPLES.values())
    unknown = [need for needs in NEEDS.values() for need in needs
               if need.startswith("gp ") and need not in {line for _, _, line in ALL}]
    assert unknown == []


@pytest.mark.parametrize("line", [pytest.param(line, id=f"{path}-{i}", marks=_marks(line)) for path, i, line in ALL])
def test_help_example_runs(line: str, workspace: Workspace, request: pytest.FixtureRequest) -> None:
    if uses_docker(line):
        request.getfixturevalue("base_image")  # the engine and the base image the sample images build on
    workspace.ensure(line)
    if line.startswith("gp serve"):
        workspace.serve(line)
        return
    result = workspace.run(line)
    assert result.returncode == 0, f"{line!r} exited {result.returncode}:\n{workspace.tail(line)}"
    assert "Traceback" not in result.stderr, workspace.tail(line)
