"""Exact money amounts. Arithmetic keeps full precision; ``quantize`` rounds to cents for invoices."""

from dataclasses import dataclass
from decimal import Decimal

from invcalc.errors import CurrencyMismatch

CENT = Decimal("0.01")


def to_decimal(value):
    """Decimal from an int, str or Decimal. Floats are refused: 0.1 is not exactly one tenth."""
    if isinstance(value, float):
        raise TypeError(f"use a str or Decimal for money, not the float {value!r}")
    return value if isinstance(value, Decimal) else Decimal(value)


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str = "EUR"

    def __post_init__(self):
        object.__setattr__(self, "amount", to_decimal(self.amount))

    @classmethod
    def zero(cls, currency="EUR"):
        return cls(Decimal(0), currency)

    def _check(self, other):
        if not isinstance(other, Money):
            return NotImplemented
        if other.currency != self.currency:
            raise CurrencyMismatch(f"cannot combine {self.currency} and {other.currency}")
        return other

    def __add__(self, other):
        other = self._check(other)
        if other is NotImplemented:
            return other
        return Money(self.amount + other.amount, self.currency)

    def __radd__(self, other):
        # lets sum() start from 0
        if other == 0:
            return self
        return self.__add__(other)

    def __sub__(self, other):
        other = self._check(other)
        if other is NotImplemented:
            return other
        return Money(self.amount - other.amount, self.currency)

    def __mul__(self, factor):
        if isinstance(factor, Money):
            return NotImplemented
        return Money(self.amount * to_decimal(factor), self.currency)

    __rmul__ = __mul__

    def __neg__(self):
        return Money(-self.amount, self.currency)

    def __lt__(self, other):
        return self.amount < self._check(other).amount

    def __le__(self, other):
        return self.amount <= self._check(other).amount

    def quantize(self):
        """Round to whole cents, halves away from zero, as printed on invoices."""
        return Money(self.amount.quantize(CENT), self.currency)

    def allocate(self, ratios):
        """Split into parts proportional to ``ratios`` that add up exactly to this amount (in cents)."""
        if not ratios or any(r < 0 for r in ratios) or sum(ratios) == 0:
            raise ValueError(f"ratios must be non-negative and not all zero, got {ratios!r}")
        cents = int(self.quantize().amount / CENT)
        total = sum(ratios)
        shares = [cents * r // total for r in ratios]
        for index in range(cents - sum(shares)):
            shares[index % len(shares)] += 1
        return [Money(Decimal(share) * CENT, self.currency) for share in shares]

    def __str__(self):
        return f"{self.quantize().amount:.2f} {self.currency}"
