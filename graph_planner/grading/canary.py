"""Canary tests: the grader's own tests, appended to the graded test modules for one run and removed afterwards.

A patch that forges the grade from inside the test process (replacing pytest's or unittest's run machinery,
forcing reports to "passed", writing PASSED lines) cannot tell them from the task's tests: their names are drawn
fresh for every run from the module's own test-name words plus a vocabulary (no fixed prefix), they are plain
functions and ``unittest.TestCase`` methods like the task's, and they live in the graded modules themselves. Some
must fail, some must pass; a must-fail canary that passes (or is missing), or a must-pass canary that is missing,
means the run was tampered with. Evidence names a canary by role and module, never by name (a name in a report
could end up in a prompt and help the next forgery).

Pure: the sandbox appends :func:`module_source` to each module inside the graded command, and calls
:func:`check_canaries` / :func:`scrub` on the result.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from graph_planner.data.record import TaskRecord
    from graph_planner.grading.recorder import RunRecord

Role = Literal["must-fail", "must-pass"]

_VOCABULARY = (
    "value empty returns handles parse format default none list keys order single multiple config error raises "
    "length check update merge split join read write load dump path name text line count range limit number "
    "string unicode bytes nested missing invalid valid basic simple large small zero negative positive round "
    "trip cache reset copy equal compare sort filter group index slice item field option flag mode state result "
    "output input width size type cast convert encode decode escape quote strip pad fill wrap trim match search "
    "replace token word char space prefix suffix start end first last next min max sum total partial full lazy "
    "strict case upper lower title repeat window offset scale unit spec record entry node edge graph tree leaf "
    "root child parent level depth step retry timeout ignore keep drop skip accept reject").split()
_WORD = re.compile(r"[a-z]{3,12}")


@dataclass(frozen=True)
class Canary:
    module: str  # repository-relative path of the test module it is appended to
    test_id: str  # pytest node id
    name: str  # function / method name (and the class name for unittest canaries)
    role: Role
    style: Literal["function", "unittest"]

    def describe(self) -> str:
        """How evidence names it: role, style and module, never the drawn name."""
        return f"a {self.role} canary ({'unittest method' if self.style == 'unittest' else 'plain function'}) " \
               f"in {self.module}"


@dataclass
class CanaryPlan:
    canaries: list[Canary] = field(default_factory=list)
    #: module -> text appended to it for this run
    sources: dict[str, str] = field(default_factory=dict)
    #: module -> the unittest.TestCase canary class, appended only where the module already uses TestCase (the
    #: styles the task's tests use; importing unittest for a plain-pytest suite would cost ~3 % of a graded run)
    unittest_sources: dict[str, str] = field(default_factory=dict)
    #: names (functions, classes) to scrub from logs
    names: set[str] = field(default_factory=set)

    def ids(self) -> set[str]:
        return {c.test_id for c in self.canaries}

    def drop_modules(self, skipped: set[str]) -> None:
        """Forget the canaries the graded command did not append: ``module`` (the file was not there) or
        ``module::unittest`` (the module does not use unittest.TestCase)."""
        self.canaries = [c for c in self.canaries if c.module not in skipped
                         and not (c.style == "unittest" and f"{c.module}::unittest" in skipped)]
        for entry in skipped:
            self.sources.pop(entry, None)
            self.unittest_sources.pop(entry.removesuffix("::unittest"), None)


def _module_words(module: str, test_ids: list[str]) -> list[str]:
    words: list[str] = []
    for test_id in test_ids:
        path, _, rest = test_id.partition("::")
        if path != module:
            continue
        for word in _WORD.findall(rest.split("[", 1)[0].lower()):
            if word not in ("test", "tests") and word not in words:
                words.append(word)
    return words


def _draw_name(rng: secrets.SystemRandom, words: list[str], taken: set[str], parts: int) -> list[str]:
    """``parts`` distinct words, at least one from the vocabulary (a module word alone could name a real test)."""
    while True:
        chosen = [rng.choice(_VOCABULARY)]
        pool = words + _VOCABULARY
        while len(chosen) < parts:
            word = rng.choice(pool)
            if word not in chosen:
                chosen.append(word)
        rng.shuffle(chosen)
        key = "_".join(chosen)
        if key not in taken:
            taken.add(key)
            return chosen


def canary_modules(task: TaskRecord, targets: list[str], hidden_modules: list[str]) -> list[str]:
    """Up to two graded test modules, a FAIL_TO_PASS one first: files of graded pytest ids (always collected, or the
    task could not be graded), test_files that are modules, and the hidden R2E modules."""
    modules: list[str] = []
    ids = [*task.fail_to_pass, *task.pass_to_pass]
    candidates = [t.split("::", 1)[0] for t in ids if "::" in t]
    candidates += [t for t in task.test_files if t.endswith(".py")]
    candidates += [t for t in targets if t.endswith(".py") and "::" not in t]
    candidates += hidden_modules
    for path in candidates:
        if path.endswith(".py") and not path.startswith("/") and ".." not in path.split("/") and path not in modules:
            modules.append(path)
    return modules[:2]


def usable_for(task: TaskRecord) -> str | None:
    """Why canaries cannot run for this task's command (None = they can): only pytest runs that go on past a
    failure can carry them."""
    cmd = f" {task.test_cmd} "
    if "pytest" not in cmd:
        return "the test command is not pytest"
    if not task.log_parser.removeprefix("parse_log_").startswith("pytest"):
        return f"log parser {task.log_parser!r} is not a pytest parser"
    if re.search(r"\s(-x|--exitfirst|--maxfail[= ]\S+|-\w*x\w*)\s", cmd):
        return "the test command stops at the first failure"
    return None


def plan_canaries(task: TaskRecord, targets: list[str], hidden_modules: list[str] | None = None,
                  second_module: bool = True) -> CanaryPlan:
    """The canaries of one run: in the first module a must-fail and a must-pass plain function plus a TestCase
    with a must-fail and a must-pass method; in the second (when there is one and ``second_module``) a plain pair."""
    rng = secrets.SystemRandom()
    plan = CanaryPlan()
    modules = canary_modules(task, targets, hidden_modules or [])
    ids = [*task.fail_to_pass, *task.pass_to_pass]
    taken = {t.split("::")[-1] for t in ids}
    for index, module in enumerate(modules[:2 if second_module else 1]):
        words = _module_words(module, ids) or _module_words(module, [f"{module}::{module.rsplit('/', 1)[-1]}"])
        chunks = []
        for role in ("must-fail", "must-pass"):
            name = "test_" + "_".join(_draw_name(rng, words, taken, rng.choice((2, 3))))
            plan.canaries.append(Canary(module, f"{module}::{name}", name, role, "function"))  # type: ignore[arg-type]
            chunks.append(_function(name, role))  # type: ignore[arg-type]
        if index == 0:
            cls = "Test" + "".join(w.title() for w in _draw_name(rng, words, taken, 2))
            methods = []
            for role in ("must-fail", "must-pass"):
                name = "test_" + "_".join(_draw_name(rng, words, taken, 2))
                plan.canaries.append(Canary(module, f"{module}::{cls}::{name}", name, role, "unittest"))  # type: ignore[arg-type]
                methods.append(_method(name, role))  # type: ignore[arg-type]
            plan.names.add(cls)
            plan.unittest_sources[module] = f"\n\nclass {cls}(__import__('unittest').TestCase):\n" + \
                "\n".join(methods)
        plan.sources[module] = "\n\n" + "\n\n".join(chunks)
    plan.names |= {c.name for c in plan.canaries}
    return plan


def _function(name: str, role: Role) -> str:
    body = f"__import__('pytest').fail({name!r}, pytrace=False)" if role == "must-fail" else "pass"
    return f"\ndef {name}():\n    {body}\n"


def _method(name: str, role: Role) -> str:
    body = f"__import__('pytest').fail({name!r}, pytrace=False)" if role == "must-fail" else "pass"
    return f"    def {name}(self):\n        {body}\n"


def selection_additions(plan: CanaryPlan, targets: list[str]) -> list[str]:
    """Canary ids to add to the command's selection: only when the targets name tests, not their modules (no
    targets = the whole suite, which collects every graded module). A unittest canary is appended only where the
    module uses TestCase, which the command line cannot know beforehand: such modules keep their plain canaries
    only (an id pytest cannot find would end the session)."""
    from graph_planner.grading.targets import covered

    if not targets:
        return []
    modules = [t for t in targets if "::" not in t]
    outside = {c.module for c in plan.canaries if not covered(c.module, modules)}
    plan.canaries = [c for c in plan.canaries if not (c.style == "unittest" and c.module in outside)]
    for module in outside:
        plan.unittest_sources.pop(module, None)
    return [c.test_id for c in plan.canaries if c.module in outside]


@dataclass
class CanaryCheck:
    tampered: list[str] = field(default_factory=list)  # evidence
    lost: list[str] = field(default_factory=list)  # canary results the log cannot show (cut, crashed session)


def _excused(canary: Canary, record: RunRecord | None) -> bool:
    """A missing canary an honest run explains: its module (or a package above it) failed to collect, pytest
    stopped on collection errors, or the command deselected it."""
    if record is None:
        return False
    if canary.test_id in record.deselected:
        return True
    for nodeid in record.collect_errors:
        path = nodeid.split("::", 1)[0].rstrip("/")
        if not path or canary.module == path or canary.module.startswith(path + "/"):
            return True
    return bool(record.collect_errors) and record.exitstatus == 2


def check_canaries(plan: CanaryPlan, statuses: dict[str, str], record: RunRecord | None,
                   session_finished: bool, log_complete: bool) -> CanaryCheck:
    """Compare each canary's parsed status with its role (see the module docstring)."""
    out = CanaryCheck()
    for canary in plan.canaries:
        status = statuses.get(canary.test_id)
        if status is None:
            if _excused(canary, record):
                continue
            if not log_complete or not session_finished:
                out.lost.append(canary.describe())
            else:
                out.tampered.append(f"{canary.describe()} is missing from a finished run")
        elif canary.role == "must-fail" and status != "FAILED":
            out.tampered.append(f"{canary.describe()} was reported {status}")
    return out


def scrub(plan: CanaryPlan, log: str, statuses: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The log and statuses as if no canary had run: their lines removed, pytest's final counts corrected."""
    if not plan.canaries:
        return log, statuses
    ids = plan.ids()
    counts = {"failed": 0, "passed": 0}
    for test_id in ids:
        status = statuses.get(test_id)
        if status == "FAILED":
            counts["failed"] += 1
        elif status == "PASSED":
            counts["passed"] += 1
    names = re.compile("|".join(rf"\b{re.escape(n)}\b" for n in sorted(plan.names)))
    lines = [line for line in log.splitlines(keepends=True) if not names.search(line)]
    text = "".join(lines)
    summary = list(_SUMMARY.finditer(text))
    if summary:
        last = summary[-1]
        fixed = _fix_counts(last.group(0), counts)
        text = text[:last.start()] + fixed + text[last.end():]
    return text, {k: v for k, v in statuses.items() if k not in ids}


_SUMMARY = re.compile(r"^=+ .*\bin \d+(?:\.\d+)?s\b.*=+[ \t]*$", re.M)
_PARTS = re.compile(r"^(=+ )(.*?)( in \d+(?:\.\d+)?s\b.*?)( =+[ \t]*)$")


def _fix_counts(line: str, counts: dict[str, int]) -> str:
    """``==== 2 failed, 5 passed in 0.1s ====`` less the canaries' counts."""
    match = _PARTS.match(line)
    if match is None:
        return line
    items = []
    for item in match.group(2).split(","):
        number, _, word = item.strip().partition(" ")
        if number.isdigit() and word in counts:
            left = int(number) - counts[word]
            if left <= 0:
                continue
            item = f"{left} {word}"
        items.append(item.strip())
    return match.group(1) + (", ".join(items) or "no tests ran") + match.group(3) + match.group(4)
