"""Screen a local JSONL file line by line before `datasets` reads it: one bad row (not UTF-8, not JSON, not an
object, or a column whose type differs from the other rows') would otherwise make pyarrow reject the whole file
without naming the row, or silently coerce the odd value (an int base_commit becoming a string). A bad line is
replaced by a marker row carrying the reason, so row numbers stay aligned and prepare writes it to rejected.jsonl
(`line N: ...`) while keeping every other row."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

#: Column of a marker row: the reason its line was rejected. prepare turns it into a rejected.jsonl entry.
REJECTED_KEY = "__gp_rejected__"


def _kind(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def screen_jsonl(path: Path, work_dir: Path | None = None) -> tuple[Path, int]:
    """Return (file to load, number of rejected lines): ``path`` itself when every line is fine, else a screened
    copy (in ``work_dir`` or a temp dir) where each bad line is ``{REJECTED_KEY: "line N: <reason>"}``."""
    raw_lines = path.read_bytes().split(b"\n")
    parsed: list[tuple[int, Any]] = []  # (line number, object or reason string)
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            parsed.append((number, f"line {number}: not UTF-8 (byte {exc.start} of the line)"))
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            parsed.append((number, f"line {number}: not valid JSON ({exc.msg})"))
            continue
        if not isinstance(obj, dict):
            parsed.append((number, f"line {number}: expected a JSON object, got {type(obj).__name__}"))
            continue
        parsed.append((number, obj))
    kinds: dict[str, Counter[str]] = {}
    for _, obj in parsed:
        if isinstance(obj, dict):
            for key, value in obj.items():
                kind = _kind(value)
                if kind is not None:
                    kinds.setdefault(key, Counter())[kind] += 1
    majority = {key: counter.most_common(1)[0][0] for key, counter in kinds.items()}
    out: list[str] = []
    bad = 0
    for number, obj in parsed:
        if isinstance(obj, dict):
            odd = [(k, _kind(v)) for k, v in obj.items() if _kind(v) not in (None, majority.get(k))]
            if odd:
                key, kind = odd[0]
                obj = (f"line {number}: column {key}: {kind} where the other rows hold {majority[key]} "
                       "(values are not coerced)")
        if isinstance(obj, str):
            bad += 1
            out.append(json.dumps({REJECTED_KEY: obj}))
        else:
            out.append(json.dumps(obj, ensure_ascii=False))
    if not bad:
        return path, 0
    target_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="gp-screened-"))
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / path.name
    target.write_text("\n".join(out) + "\n", encoding="utf-8")
    return target, bad
