"""Bug-injection modifiers, target choice, the location split and the input checks of `gp data synth` (no test
runs here: fast)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from graph_planner.synth.modifiers import MODIFIERS, mutations_for
from graph_planner.synth.split import split_by_location
from graph_planner.synth.synth import check_repo, plan_candidates
from graph_planner.synth.targets import find_targets, repo_graph
from graph_planner.synth.validate import SynthInputError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "datasets" / "sample" / "repos"

SOURCE = b'''import math  # keep me


class Base:
    pass


class Shape(Base, object):
    """A shape."""

    def area(self, width, height):
        # the comment stays
        total = 0
        scale = 2
        for i in range(3):
            total += i
        if width < height:
            total = total - width
        while total > 100:
            total //= 2
        return (width * height) / scale + total if True else 0  # trailing comment
'''


def _mutations(kind="function", qualname="Shape.area"):
    return mutations_for(SOURCE, "pkg/shape.py", f"fn:pkg/shape.py::{qualname}", kind, qualname)


def test_every_modifier_kind_makes_a_bug_and_every_bug_parses():
    found = {m.modifier for m in _mutations()} | {m.modifier for m in _mutations("class", "Shape")}
    assert found == set(MODIFIERS)
    for m in _mutations() + _mutations("class", "Shape"):
        ast.parse(m.mutated)
        assert m.mutated != SOURCE


def test_text_outside_the_edit_is_kept_byte_for_byte():
    """Text splicing keeps comments and layout: only [start, end) changes."""
    for m in _mutations():
        assert m.mutated[:m.start] == SOURCE[:m.start]
        assert m.mutated[m.start + len(m.replacement):] == SOURCE[m.end:]
        assert b"# the comment stays" in m.mutated and b"# trailing comment" in m.mutated
        assert b"import math  # keep me" in m.mutated


def test_specific_edits():
    by_kind: dict[str, list[bytes]] = {}
    for m in _mutations() + _mutations("class", "Shape"):
        by_kind.setdefault(m.modifier, []).append(m.mutated)
    assert any(b"if width <= height:" in t for t in by_kind["operator_flip"])
    assert any(b"(width * height) * scale" in t for t in by_kind["operator_flip"])
    assert any(b"total = width - total" in t for t in by_kind["swap_operands"])
    assert any(b"scale = 3" in t for t in by_kind["change_constant"])
    assert any(b"if not (width < height):" in t for t in by_kind["invert_conditional"])
    assert any(b"if width < height" not in t for t in by_kind["remove_conditional"])
    assert any(b"scale = 2" not in t for t in by_kind["remove_assignment"])
    assert any(b"for i in range(3)" not in t for t in by_kind["remove_loop"])
    assert any(b"        scale = 2\n        total = 0\n" in t for t in by_kind["shuffle_lines"])
    assert {t.split(b"class Shape", 1)[1].split(b":", 1)[0] for t in by_kind["remove_base_class"]} == {
        b"(object)", b"(Base)"}


def test_mutations_are_distinct_and_ordered_the_same_every_time():
    first, second = _mutations(), _mutations()
    assert [m.key for m in first] == [m.key for m in second]
    assert len({m.mutated for m in first}) == len(first)


def test_unknown_target_and_broken_file_give_nothing():
    assert mutations_for(SOURCE, "p.py", "x", "function", "Shape.nope") == []
    assert mutations_for(b"def f(:\n", "p.py", "x", "function", "f") == []


def test_targets_are_covered_code_never_tests():
    targets = find_targets(repo_graph(SAMPLES / "invcalc", "invcalc"))
    ids = {t.node_id for t in targets}
    assert "fn:invcalc/cart.py::Cart.total" in ids  # reached through a method call the tests make
    assert "cls:invcalc/discounts.py::BulkDiscount" in ids
    assert not any("tests/" in t.path or t.path == "conftest.py" for t in targets)


def test_candidates_are_deterministic_for_a_seed_and_deduplicated():
    a, _ = plan_candidates(SAMPLES / "textkit", "textkit", seed=3, per_target=2)
    b, _ = plan_candidates(SAMPLES / "textkit", "textkit", seed=3, per_target=2)
    c, _ = plan_candidates(SAMPLES / "textkit", "textkit", seed=4, per_target=2)
    assert [m.key for m in a] == [m.key for m in b]
    assert [m.key for m in a] != [m.key for m in c]
    assert len({m.key for m in a}) == len(a) > 10


def test_split_by_location_never_shares_a_location_and_is_stable():
    locations = [f"repo:fn{i}" for i in range(20)]
    split = split_by_location(locations, seed=0, val_frac=0.15, test_frac=0.15)
    assert split == split_by_location(reversed(locations), seed=0, val_frac=0.15, test_frac=0.15)
    counts = {s: sum(1 for v in split.values() if v == s) for s in ("train", "val", "test")}
    assert counts == {"train": 14, "val": 3, "test": 3}
    small = split_by_location(["a", "b", "c"], seed=0, val_frac=0.1, test_frac=0.1)
    assert sorted(small.values()) == ["test", "train", "val"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


@pytest.mark.parametrize(("layout", "message"), [
    ({"README.md": "docs only\n", "src/main.c": "int main(){}\n"}, "no Python file"),
    ({"pkg/__init__.py": "X = 1\n", "conftest.py": ""}, "no test file"),
])
def test_bad_repositories_are_refused_with_one_line(tmp_path, layout, message):
    for rel, text in layout.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    with pytest.raises(SynthInputError, match=message):
        check_repo(tmp_path)


def test_a_dirty_work_tree_is_refused(tmp_path):
    (tmp_path / "pkg.py").write_text("def f():\n    return 1\n")
    (tmp_path / "test_pkg.py").write_text("from pkg import f\n\ndef test_f():\n    assert f() == 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "init")
    check_repo(tmp_path)  # clean: accepted
    (tmp_path / "pkg.py").write_text("def f():\n    return 2\n")
    with pytest.raises(SynthInputError, match="work tree is dirty"):
        check_repo(tmp_path)


def _report(statuses, **kw):
    from graph_planner.episode.results import TestReport

    return TestReport(resolved=False, mode="swebench", statuses=statuses, **kw)


def test_judge_turns_runs_into_f2p_p2p_or_a_reason():
    from graph_planner.synth.validate import Baseline, judge

    (m,) = _mutations()[:1]
    base = Baseline(passing=["t::a", "t::b", "t::c"], seconds=1.0, run_seconds=0.5)
    flip = {"t::a": "FAILED", "t::b": "PASSED", "t::c": "PASSED", "canary::x": "PASSED"}
    ok = judge(m, base, [_report(flip, log_tail="FAILED t::a - AssertionError: assert 3 == 4\n"), _report(flip)])
    assert ok.reason is None and ok.fail_to_pass == ["t::a"] and ok.pass_to_pass == ["t::b", "t::c"]
    assert ok.symptoms == {"t::a": "AssertionError: assert 3 == 4"}
    same = {"t::a": "PASSED", "t::b": "PASSED", "t::c": "PASSED"}
    assert judge(m, base, [_report(same)]).reason == "fails no test"
    assert judge(m, base, [_report({"t.py": "ERROR"})]).reason == "breaks collection of the whole suite"
    assert judge(m, base, [_report({"t::a": "FAILED", "t::b": "PASSED"})]).reason == "some tests are no longer collected"
    assert judge(m, base, [_report(flip), _report(same)]).reason.startswith("flaky")
    assert judge(m, base, [_report(flip, timed_out=True)]).reason == "timeout"
    assert judge(m, base, [_report(flip, tampered=True), _report(flip)]).reason.startswith("tampered")
