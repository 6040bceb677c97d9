import pytest

from minicfg.coerce import to_bool, to_duration, to_int, to_list
from minicfg.errors import CoercionError


@pytest.mark.parametrize("word", ["yes", "True", "ON", "1"])
def test_true_words(word):
    assert to_bool(word) is True


def test_false_word():
    assert to_bool(" off ") is False


def test_bool_rejects_other_words():
    with pytest.raises(CoercionError):
        to_bool("maybe")


def test_int_accepts_underscores_and_hex():
    assert to_int("10_000") == 10000
    assert to_int("0x1F") == 31


def test_list_splits_commas_and_lines():
    assert to_list("a, b,\nc,,") == ["a", "b", "c"]


@pytest.mark.parametrize("text, seconds", [("90", 90.0), ("1m30s", 90.0), ("250ms", 0.25), ("2h", 7200.0)])
def test_durations(text, seconds):
    assert to_duration(text) == seconds


def test_bad_duration():
    with pytest.raises(CoercionError):
        to_duration("5 parsecs")
