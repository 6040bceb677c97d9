from decimal import Decimal

import pytest

from invcalc.errors import CurrencyMismatch
from invcalc.money import Money


def test_money_keeps_full_precision_until_quantized():
    assert (Money("1.005") * 3).amount == Decimal("3.015")


def test_quantize_rounds_to_cents():
    assert Money("1.234").quantize() == Money("1.23")
    assert Money("1.236").quantize() == Money("1.24")


def test_sum_of_money():
    assert sum([Money("1.10"), Money("2.20")]) == Money("3.30")


def test_currency_mismatch():
    with pytest.raises(CurrencyMismatch):
        Money("1", "EUR") + Money("1", "USD")


def test_float_amounts_are_refused():
    with pytest.raises(TypeError):
        Money(0.1)


def test_allocate_adds_up_exactly():
    parts = Money("100.00").allocate([1, 1, 1])
    assert parts == [Money("33.34"), Money("33.33"), Money("33.33")]
    assert sum(parts) == Money("100.00")


def test_str_shows_two_decimals():
    assert str(Money("5", "USD")) == "5.00 USD"
