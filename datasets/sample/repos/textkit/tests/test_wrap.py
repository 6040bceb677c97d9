import pytest

from textkit.wrap import fill, truncate, wrap


def test_wrap_greedy_lines():
    assert wrap("the quick brown fox jumps", width=10) == ["the quick", "brown fox", "jumps"]


def test_wrap_splits_long_words():
    assert wrap("abcdefghij", width=4) == ["abcd", "efgh", "ij"]


def test_fill_joins_with_newlines():
    assert fill("a b c", width=3) == "a b\nc"


def test_wrap_rejects_zero_width():
    with pytest.raises(ValueError):
        wrap("text", width=0)


def test_truncate_keeps_short_text():
    assert truncate("short", 10) == "short"


def test_truncate_exact_length_is_unchanged():
    assert truncate("12345", 5) == "12345"
