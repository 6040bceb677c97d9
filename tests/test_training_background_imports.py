"""Slow imports started on a background thread (training/background_imports.py): a module imported there is the
one the caller gets later, and a module that cannot be imported is left to the real import to report."""

from __future__ import annotations

import sys

import pytest

from graph_planner.training.background_imports import DEMO_IMPORTS, GRPO_IMPORTS, SFT_IMPORTS, import_in_background


def test_a_failing_background_import_is_left_to_the_real_import(tmp_path, monkeypatch):
    (tmp_path / "gp_bg_ok.py").write_text("VALUE = 42\n")
    (tmp_path / "gp_bg_broken.py").write_text("raise RuntimeError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    import_in_background("gp_bg_broken", "gp_bg_ok").join(timeout=30)

    assert sys.modules["gp_bg_ok"].VALUE == 42  # the failure before it did not stop the rest
    with pytest.raises(RuntimeError, match="broken on purpose"):
        import gp_bg_broken  # noqa: F401 - the error surfaces where the module is used


def test_the_named_modules_exist():
    """A renamed module would only cost time, silently: the lists must name importable modules."""
    import importlib.util

    for name in {*DEMO_IMPORTS, *GRPO_IMPORTS, *SFT_IMPORTS}:
        assert importlib.util.find_spec(name) is not None, name
