"""Patch forms: CGM edits and unified diffs are read from model text and normalised into one unified diff that
`git apply` accepts."""

from __future__ import annotations

import subprocess

import pytest

from graph_planner.episode.patch import (
    FileEdit,
    PatchFormatError,
    PatchProposal,
    RepairRequest,
    diff_stats,
    edits_from_payload,
    edits_to_diff,
    parse_patch_output,
)

SOURCE = "def total(xs):\n    s = 0\n    for x in xs[1:]:\n        s += x\n    return s\n"


def _git_apply(tmp_path, files: dict[str, str], diff: str) -> dict[str, str]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "fix.patch").write_text(diff)
    subprocess.run(["git", "apply", "fix.patch"], cwd=tmp_path, check=True, capture_output=True)
    return {p.relative_to(tmp_path).as_posix(): p.read_text() for p in tmp_path.rglob("*.py")}


def test_line_range_edits_become_a_diff_git_applies(tmp_path):
    edits = [FileEdit("pkg/calc.py", 3, 3, "    for x in xs:\n"),
             FileEdit("pkg/calc.py", 1, 0, '"""Sums."""\n')]  # insertion before line 1
    diff = edits_to_diff(edits, {"pkg/calc.py": SOURCE}.get)
    assert diff.startswith("diff --git a/pkg/calc.py b/pkg/calc.py\n")
    assert diff_stats(diff) == {"added": 2, "removed": 1}
    files = _git_apply(tmp_path, {"pkg/calc.py": SOURCE}, diff)
    assert files["pkg/calc.py"] == '"""Sums."""\n' + SOURCE.replace("xs[1:]", "xs")


def test_edit_creating_a_new_file(tmp_path):
    diff = edits_to_diff([FileEdit("pkg/new.py", 1, 0, "X = 1")], lambda path: None)
    assert "new file mode 100644" in diff and "--- /dev/null" in diff
    assert _git_apply(tmp_path, {"pkg/calc.py": SOURCE}, diff)["pkg/new.py"] == "X = 1\n"


@pytest.mark.parametrize("edits, message", [
    ([FileEdit("pkg/calc.py", 4, 9, "x\n")], "outside the file"),
    ([FileEdit("pkg/calc.py", 0, 1, "x\n")], "outside the file"),
    ([FileEdit("pkg/calc.py", 2, 3, "a\n"), FileEdit("pkg/calc.py", 3, 4, "b\n")], "overlapping"),
    ([FileEdit("pkg/missing.py", 2, 3, "a\n")], "does not exist"),
])
def test_bad_edits_are_refused_with_the_file_and_lines(edits, message):
    with pytest.raises(PatchFormatError, match=message):
        edits_to_diff(edits, {"pkg/calc.py": SOURCE}.get)


def test_model_text_is_read_as_edits_json_or_diff():
    edits, diff = parse_patch_output('Here you go:\n```json\n{"edits": [{"path": "a.py", "start": 2, "end": 2, '
                                     '"new_text": "y = 2\\n"}]}\n```')
    assert diff is None and edits == [FileEdit("a.py", 2, 2, "y = 2\n")]
    edits, diff = parse_patch_output("```diff\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n```")
    assert edits is None and diff == "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
    assert parse_patch_output("diff --git a/a.py b/a.py\r\n--- a/a.py\r\n")[1] == "diff --git a/a.py b/a.py\n--- a/a.py\n"
    with pytest.raises(PatchFormatError, match="no edits JSON or unified diff"):
        parse_patch_output("I could not find the bug, sorry.")
    with pytest.raises(PatchFormatError, match="needs path, start, end and new_text"):
        parse_patch_output('{"edits": [{"path": "a.py"}]}')


def test_cgm_service_payload_shapes():
    assert edits_from_payload({"patch": {"edits": [{"path": "a.py", "start_line": 1, "end_line": 1,
                                                    "text": "z\n"}]}})[0] == [FileEdit("a.py", 1, 1, "z\n")]
    assert edits_from_payload({"diff": "--- a/a.py\n+++ b/a.py"})[1] == "--- a/a.py\n+++ b/a.py\n"
    with pytest.raises(PatchFormatError):
        edits_from_payload({"summary": "nothing"})


def test_request_and_proposal_survive_json():
    request = RepairRequest("t1", "issue", "plan", {"nodes": [{"id": "fn:a.py::f"}], "edges": []},
                            [{"node_id": "fn:a.py::f", "code": "def f(): pass"}], ["note"], ["fn:a.py::f"],
                            {"max_files": 2})
    assert RepairRequest.from_json(request.to_json()) == request
    proposal = PatchProposal(edits=[FileEdit("a.py", 1, 1, "x\n")], raw="raw", diagnostic="gold", prompt_tokens=3)
    again = PatchProposal.from_dict(proposal.to_dict())
    assert again.edits == proposal.edits and again.diagnostic == "gold" and again.prompt_tokens == 3
