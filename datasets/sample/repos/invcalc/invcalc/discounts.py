"""Discounts on cart lines. Each discount decides whether it applies to a line and how much it takes off."""

from decimal import Decimal

from invcalc.catalog import normalize_sku
from invcalc.money import Money, to_decimal


class Discount:
    """Base class. ``skus=None`` means the discount applies to every product."""

    def __init__(self, skus=None):
        self.skus = None if skus is None else {normalize_sku(s) for s in skus}

    def applies_to(self, line):
        return self.skus is None or line.product.sku in self.skus

    def amount(self, line):
        """Amount taken off ``line`` (full precision, never more than the line's gross)."""
        raise NotImplementedError


class PercentageDiscount(Discount):
    def __init__(self, percent, skus=None):
        super().__init__(skus)
        self.percent = to_decimal(percent)
        if not Decimal(0) <= self.percent <= Decimal(100):
            raise ValueError(f"percent must be within 0..100, got {percent}")

    def amount(self, line):
        return line.gross() * (self.percent / Decimal(100))


class FixedDiscount(Discount):
    """A fixed amount off each unit, never taking a line below zero."""

    def __init__(self, per_unit, skus=None):
        super().__init__(skus)
        self.per_unit = per_unit

    def amount(self, line):
        return min(self.per_unit * line.quantity, line.gross())


class BulkDiscount(PercentageDiscount):
    """``percent`` off lines of ``min_quantity`` units or more."""

    def __init__(self, min_quantity, percent, skus=None):
        super().__init__(percent, skus)
        if min_quantity < 1:
            raise ValueError(f"min_quantity must be at least 1, got {min_quantity}")
        self.min_quantity = min_quantity

    def applies_to(self, line):
        return super().applies_to(line) and line.quantity > self.min_quantity


def best_discount(discounts, line):
    """The applicable discount that takes the most off ``line`` (discounts do not stack), or None."""
    best = None
    best_amount = Money.zero(line.product.unit_price.currency)
    for discount in discounts:
        if not discount.applies_to(line):
            continue
        amount = discount.amount(line)
        if best_amount < amount:
            best, best_amount = discount, amount
    return best
