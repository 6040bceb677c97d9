"""Patch guard: diffs escaping the repo, binary junk, oversize or header-less diffs are refused with a reason."""

from __future__ import annotations

import pytest

from graph_planner.sandbox.base import PatchRejected
from graph_planner.sandbox.patching import check_patch, created_files, touched_files

GOOD = (
    "diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    "diff --git a/pkg/new.py b/pkg/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+b = 1\n"
)


def test_a_plain_text_diff_passes_and_names_its_files():
    assert check_patch(GOOD) == ["pkg/mod.py", "pkg/new.py"]
    assert created_files(GOOD) == ["pkg/new.py"]
    assert touched_files(GOOD) == ["pkg/mod.py", "pkg/new.py"]


@pytest.mark.parametrize(("diff", "reason"), [
    ("--- a/../x.py\n+++ b/../x.py\n@@ -1 +1 @@\n-a\n+b\n", "'..' escapes"),
    ("--- a/pkg/../../x.py\n+++ b/pkg/../../x.py\n@@ -1 +1 @@\n-a\n+b\n", "'..' escapes"),
    ("--- /dev/null\n+++ /etc/passwd\n@@ -0,0 +1 @@\n+root::0:0\n", "absolute path"),
    ("diff --git a/x b/x\nrename from x\nrename to ../../x\n", "'..' escapes"),
    ("--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n", ".git"),
    ("diff --git a/img.png b/img.png\nGIT binary patch\nliteral 4\nLcmZ>b\n", "binary"),
    ("diff --git a/img.png b/img.png\nBinary files a/img.png and b/img.png differ\n", "binary"),
    ("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\x00\x01\n", "NUL"),
    ("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\x07\n", "control character"),
    ("", "empty"),
    ("just some text, not a diff\n", "names no file"),
])
def test_unsafe_or_junk_patches_are_rejected_with_the_reason(diff, reason):
    with pytest.raises(PatchRejected, match=reason):
        check_patch(diff)


def test_size_and_file_count_limits():
    with pytest.raises(PatchRejected, match="over the 100-byte limit"):
        check_patch(GOOD * 3, max_bytes=100)
    with pytest.raises(PatchRejected, match="touches 2 files, over the limit of 1"):
        check_patch(GOOD, max_files=1)
