"""The rule policy (no model): find from the issue -> expand -> read -> commit -> repair -> submit.

It drives smoke tests and is the fallback when a model's output cannot be parsed (``env.use_rule_fallback``).
It decides from the structured observation and the turns so far, so it can take over at any step.
"""

from __future__ import annotations

import re
from typing import Any

from graph_planner.agents import PolicyDecision
from graph_planner.episode.actions import (
    ActionBase,
    ExploreExpand,
    ExploreFind,
    MemoryCommit,
    Read,
    Repair,
    Submit,
)
from graph_planner.episode.turns import Turn
from graph_planner.episode.wire import render_action

_BACKTICK = re.compile(r"`([^`\n]{1,120})`")
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_.]*)\(")
_SNAKE = re.compile(r"\b([a-z][a-z0-9]*_[a-z0-9_]+)\b")
_CAMEL = re.compile(r"\b([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[A-Z][a-z]{2,}[A-Z]\w*)\b")
_PATH = re.compile(r"\b([\w/]+\.py)\b")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Names that appear in issues but never locate a bug (builtins, stdlib types, test words).
_NOISE = {
    "print", "len", "str", "int", "float", "bool", "dict", "list", "set", "tuple", "repr", "type", "isinstance",
    "range", "open", "round", "sorted", "Decimal", "None", "True", "False", "self", "assert", "import", "from",
    "return", "def", "class", "pytest", "python", "Traceback", "Exception", "ValueError", "TypeError", "KeyError",
    "AssertionError", "Expected", "Actual", "expected", "actual", "the", "and", "for", "with", "not", "this",
}
_CODE_KINDS = ("FUNCTION", "CLASS")
#: A pytest node id as bug reports quote it: ``tests/test_x.py::test_name`` or ``tests/test_x.py::TestCls::test_y[p]``.
_PYTEST_ID = re.compile(r"([\w./-]+\.py)::([A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)")
#: A failing-test line of a symptom report: ``- `<pytest id>`: <message>``.
_SYMPTOM_LINE = re.compile(r"`([\w./-]+\.py::[^`]+)`:?\s*(.*)")


def failing_tests(text: str) -> list[tuple[str, str]]:
    """(test file, qualified test name) of the pytest ids an issue quotes, in order, without duplicates; a class
    test ``A::test_b`` comes back as ``A.test_b`` (the code graph's qualname)."""
    out: list[tuple[str, str]] = []
    for path, name in _PYTEST_ID.findall(text):
        item = (path, name.replace("::", "."))
        if _is_test_path(path) and item not in out:
            out.append(item)
    return out


def symptom_words(text: str) -> set[str]:
    """Identifiers in the failing tests' messages (``'PlainRenderer' object has no attribute 'render'``): names
    a symptom report gives that may be the code under test."""
    words: set[str] = set()
    for line in text.splitlines():
        match = _SYMPTOM_LINE.search(line)
        if match:
            words.update(w for w in _IDENT.findall(match.group(2)) if len(w) > 2 and w not in _NOISE)
    return words


def _name_tokens(name: str) -> set[str]:
    """Lower-case word parts of a snake_case / CamelCase name (``unique_slug`` -> {unique, slug})."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return {t.lower() for t in spaced.split("_") if len(t) > 1 and t.lower() != "test"}


def code_under_test(nodes: list[dict[str, Any]], test_name: str, words: set[str]) -> dict[str, Any] | None:
    """The code node of an expanded test most likely to hold the bug: what the test calls (not other tests, not
    the file), ranked by the words its name shares with the test's name and by names the failure message gives,
    then by the listing's own order (the graph's edge ranking)."""
    wanted = _name_tokens(test_name.rsplit(".", 1)[-1])
    said = {w.lower() for w in words}

    def score(pair: tuple[int, dict[str, Any]]) -> tuple[float, int]:
        rank, node = pair
        name = str(node.get("id", "")).rsplit("::", 1)[-1]
        parts = name.split(".")
        overlap = len(wanted & _name_tokens(parts[-1])) + 0.5 * len(wanted & _name_tokens(parts[0]))
        named = 1.0 if {p.lower() for p in parts} & said else 0.0
        calls = 0.5 if node.get("edge") == "calls" and node.get("direction") == "out" else 0.0
        return (-(overlap + named + calls), rank)

    code = [(i, n) for i, n in enumerate(nodes)
            if n.get("kind") in _CODE_KINDS and not _is_test_path(str(n.get("path", "")))]
    return min(code, key=score)[1] if code else None


def test_node(nodes: list[dict[str, Any]], tests: list[tuple[str, str]]) -> dict[str, Any] | None:
    """The listed node of a failing test (``fn:<file>::<qualname>``), if the listing has one."""
    ids = {f"fn:{path}::{name}" for path, name in tests}
    return next((n for n in nodes if n.get("id") in ids), None)


def issue_queries(text: str, title: str = "", limit: int = 6) -> list[str]:
    """Identifiers an issue names, most specific first: names in the title, then called names, snake_case /
    CamelCase code names (backticked first), other backticked words and paths; ALL_CAPS tokens last."""
    text = f"{title}\n{text}"
    tests = [name.rsplit(".", 1)[-1] for _, name in failing_tests(text)]
    buckets: list[list[str]] = [[], [], [], [], []]

    def add(name: str, bucket: int) -> None:
        name = name.strip(".")
        if len(name) < 3 or name in _NOISE:
            return
        if name.isupper() and bucket < 4:
            bucket = 4
        buckets[bucket].append(name)

    spans = _BACKTICK.findall(text)
    for call in _CALL.findall(text):
        add(call.split(".")[-1], 0)
    for span in spans:
        for ident in _IDENT.findall(span):
            if "_" in ident.strip("_") or any(c.isupper() for c in ident[1:]):
                add(ident, 1)
    for name in _SNAKE.findall(text) + _CAMEL.findall(text):
        add(name, 2)
    for span in spans:
        if re.fullmatch(r"[A-Za-z_][\w.]*", span.strip()):
            add(span.strip().split(".")[-1], 3)
    for path in _PATH.findall(text):
        add(path, 3)
    best_bucket: dict[str, int] = {}
    for i, bucket in enumerate(buckets):
        for name in bucket:
            best_bucket.setdefault(name, i)
    in_title = set(_IDENT.findall(title))
    # code-like names the title mentions first, then by bucket (dict order keeps first appearance on ties)
    ranked = sorted(best_bucket, key=lambda n: (not (n in in_title and best_bucket[n] <= 2), best_bucket[n]))
    # a symptom report (failing pytest ids) is searched by its tests' names first: the test leads to the code
    return list(dict.fromkeys([*tests, *(n for n in ranked if n not in tests)]))[:limit]


def _is_test_path(path: str) -> bool:
    parts = path.split("/")
    return any(p in ("tests", "test", "testing") for p in parts[:-1]) or parts[-1].startswith("test_") \
        or parts[-1].endswith("_test.py")


def best_node(nodes: list[dict[str, Any]], exclude: set[str] = frozenset()) -> dict[str, Any] | None:  # type: ignore[assignment]
    """The first code node (function/class) outside the tests, else the first non-test node."""
    usable = [n for n in nodes if n.get("id") not in exclude and not _is_test_path(str(n.get("path", "")))]
    for node in usable:
        if node.get("kind") in _CODE_KINDS:
            return node
    return usable[0] if usable else None


class RulePolicy:
    """Deterministic planner. ``max_repairs`` repairs are tried before submitting."""

    name = "rule"

    def __init__(self, max_repairs: int = 1) -> None:
        self.max_repairs = max_repairs

    def reset(self) -> None:  # stateless: everything is derived from the observation and history
        return None

    def act(self, obs_text: str, obs: dict[str, Any], history: list[Turn]) -> PolicyDecision:
        action = self.next_action(obs, history)
        return PolicyDecision(raw_output=render_action(action), action=action, response_text=render_action(action))

    def next_action(self, obs: dict[str, Any], history: list[Turn]) -> ActionBase:
        done = [t.action for t in history if t.action]
        names = [a["name"] for a in done]
        memory = list(obs.get("memory", {}).get("nodes", []))
        steps_left = int(obs.get("steps_left", 99))
        repairs = names.count("repair")
        last_repair = obs.get("last_repair") or {}
        if steps_left <= 1 or last_repair.get("status") == "kept" or repairs >= self.max_repairs:
            return Submit()
        if memory and (steps_left <= 2 or names[-1:] == ["memory_commit"] or "read" in names):
            return self._repair(obs, memory)
        last = obs.get("last_action") or {}
        result = obs.get("result") or {}
        seen = {a["arguments"].get("node_id") for a in done if a["name"] in ("explore_expand", "read")}
        if last.get("name") == "read" and not obs.get("error"):
            return self._commit(result.get("node_id"), history)
        under_test = self._under_test(obs) if last.get("name") == "explore_expand" and not obs.get("error") else None
        if steps_left <= 3 and not memory:
            target = under_test["id"] if under_test else self._latest_target(history)
            if target:
                return self._commit(target, history)
        if last.get("name") == "explore_expand" and not obs.get("error"):
            target = result.get("node_id")
            if under_test:
                return Read(node_id=under_test["id"])
            if target and target.split(":", 1)[0] in ("fn", "cls"):
                return Read(node_id=target)
            node = best_node(result.get("nodes", []), exclude=seen)
            if node:
                return Read(node_id=node["id"])
        if last.get("name") == "explore_find" and not obs.get("error"):
            node = self._failing_test_hit(obs, seen) or best_node(result.get("nodes", []), exclude=seen)
            if node:
                return ExploreExpand(node_id=node["id"], hop=1)
        return self._find(obs, done)

    @staticmethod
    def _failing_test_hit(obs: dict[str, Any], seen: set[str | None]) -> dict[str, Any] | None:
        """A failing test the issue names, listed by the last find and not expanded yet: expanding it shows the
        code it calls, where a bug reported only by its symptoms is."""
        issue = obs.get("issue", {})
        tests = failing_tests(f"{issue.get('title', '')}\n{issue.get('text', '')}")
        hit = test_node((obs.get("result") or {}).get("nodes", []), tests) if tests else None
        return hit if hit and hit["id"] not in seen else None

    @staticmethod
    def _under_test(obs: dict[str, Any]) -> dict[str, Any] | None:
        """After expanding a failing test the issue names: the code node it most likely tests."""
        result = obs.get("result") or {}
        issue = obs.get("issue", {})
        text = f"{issue.get('title', '')}\n{issue.get('text', '')}"
        expanded = str(result.get("node_id") or "")
        tests = {f"fn:{path}::{name}": name for path, name in failing_tests(text)}
        if expanded not in tests:
            return None
        return code_under_test(result.get("nodes", []), tests[expanded], symptom_words(text))

    def _find(self, obs: dict[str, Any], done: list[dict[str, Any]]) -> ActionBase:
        tried = {a["arguments"].get("query") for a in done if a["name"] == "explore_find"}
        issue = obs.get("issue", {})
        for query in issue_queries(issue.get("text", ""), issue.get("title", "")):
            if query not in tried:
                return ExploreFind(query=query)
        words = [w for w in _IDENT.findall(issue.get("title", "")) if len(w) > 3 and w not in _NOISE]
        for word in words:
            if word not in tried:
                return ExploreFind(query=word)
        return Submit()

    @staticmethod
    def _latest_target(history: list[Turn]) -> str | None:
        for turn in reversed(history):
            if turn.action and turn.action["name"] in ("read", "explore_expand"):
                return turn.action["arguments"]["node_id"]
            nodes = (turn.info.get("result") or {}).get("nodes") or []
            node = best_node(nodes)
            if node:
                return node["id"]
        return None

    @staticmethod
    def _commit(node_id: str | None, history: list[Turn]) -> ActionBase:
        """Commit the read node plus up to two code neighbours from the last expand in the same file."""
        ids = [node_id] if node_id else []
        path = node_id.split(":", 1)[-1].split("::", 1)[0] if node_id else ""
        for turn in reversed(history):
            if turn.action and turn.action["name"] == "explore_expand":
                for node in (turn.info.get("result") or {}).get("nodes", []):
                    if len(ids) >= 3:
                        break
                    if node.get("kind") in _CODE_KINDS and node.get("path") == path and node["id"] not in ids:
                        ids.append(node["id"])
                break
        if not ids:
            return Submit()
        return MemoryCommit(node_ids=ids, note="code named by the issue and its neighbours")

    @staticmethod
    def _repair(obs: dict[str, Any], memory: list[str]) -> ActionBase:
        issue = obs.get("issue", {})
        title = issue.get("title") or issue.get("text", "").strip().splitlines()[0:1] or ["the reported issue"]
        title = title if isinstance(title, str) else title[0]
        targets = [m for m in memory if m.split(":", 1)[0] in ("fn", "cls")][:3] or memory[:3]
        return Repair(plan=f"Fix: {title[:300]}. Change the code in the target nodes so the reported behaviour "
                           "matches the expected one.", target_node_ids=targets)


class SynthesizerOnlyPolicy(RulePolicy):
    """`--agent cgm`: the synthesiser alone on the task. Localisation is a plain search for the issue's names
    (no planner reasoning): find -> commit the hits -> repair -> submit; when the issue only quotes failing tests:
    find the test -> expand it -> commit the code it calls -> repair -> submit."""

    name = "cgm-only"

    def next_action(self, obs: dict[str, Any], history: list[Turn]) -> ActionBase:
        done = [t.action for t in history if t.action]
        names = [a["name"] for a in done]
        memory = list(obs.get("memory", {}).get("nodes", []))
        if "repair" in names or int(obs.get("steps_left", 99)) <= 1:
            return Submit()
        if memory:
            return self._repair(obs, memory)
        last = obs.get("last_action") or {}
        if last.get("name") == "explore_expand" and not obs.get("error"):
            under_test = self._under_test(obs)
            if under_test:
                return MemoryCommit(node_ids=[under_test["id"]], note="the code the failing test calls")
        if last.get("name") == "explore_find" and not obs.get("error"):
            seen = {a["arguments"].get("node_id") for a in done if a["name"] == "explore_expand"}
            hit = self._failing_test_hit(obs, seen)
            if hit:
                return ExploreExpand(node_id=hit["id"], hop=1)
            nodes = [n for n in (obs.get("result") or {}).get("nodes", []) if not _is_test_path(str(n.get("path")))]
            code = [n["id"] for n in nodes if n.get("kind") in _CODE_KINDS][:3]
            if code:
                return MemoryCommit(node_ids=code, note="search hits for the issue's names")
        return self._find(obs, done)
