"""docs/seed_compatibility.md stays honest: every row has a known status, every test it names exists, and every
row that claims to work names a test."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "seed_compatibility.md"
STATUSES = {"works", "mapped", "differs", "refused", "partial", "not done"}
ROW = re.compile(r"^\| (\d+\.\d+) \|")


def rows() -> list[tuple[str, str, str, str]]:
    """(number, item, status, test) of every numbered table row (cells hold no '|')."""
    out = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if ROW.match(line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            assert len(cells) == 5, f"row needs 5 cells: {line}"
            number, item, status, _here, test = cells
            out.append((number, item, status, test))
    return out


def test_every_row_has_a_known_status_and_existing_test():
    table = rows()
    assert len(table) > 150
    problems = []
    for number, item, status, test in table:
        if status not in STATUSES:
            problems.append(f"{number} {item}: unknown status {status!r}")
        if test in ("", "—"):
            if status in ("works", "mapped", "refused"):
                problems.append(f"{number} {item}: status {status} needs a test")
            continue
        path, _, name = test.partition("::")
        file = ROOT / path
        if not file.is_file() or not re.search(rf"^def {re.escape(name)}\(", file.read_text(), re.MULTILINE):
            problems.append(f"{number} {item}: test {test} not found")
    assert problems == []


def test_status_counts_are_what_the_doc_reports():
    counts = Counter(status for _, _, status, _ in rows())
    assert set(counts) <= STATUSES
    assert counts["works"] + counts["mapped"] > counts["differs"] + counts["refused"] + counts["partial"]
