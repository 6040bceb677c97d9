from textkit.normalize import collapse_whitespace, normalize, strip_accents


def test_strip_accents_removes_combining_marks():
    assert strip_accents("Crème brûlée") == "Creme brulee"


def test_collapse_whitespace_joins_lines_and_tabs():
    assert collapse_whitespace("  a\tb\n\nc  ") == "a b c"


def test_normalize_folds_case_and_accents():
    assert normalize("  Ça  Va ") == "ca va"


def test_normalize_can_keep_case_and_accents():
    assert normalize("Ça  Va", lower=False, accents=True) == "Ça Va"
