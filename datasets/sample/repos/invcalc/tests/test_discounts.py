from invcalc.cart import LineItem
from invcalc.catalog import Product
from invcalc.discounts import BulkDiscount, FixedDiscount, PercentageDiscount, best_discount
from invcalc.money import Money

PEN = Product("PEN-1", "Pen", Money("2.00"))


def test_percentage_discount_amount():
    assert PercentageDiscount(10).amount(LineItem(PEN, 3)) == Money("0.60")


def test_discount_limited_to_skus():
    discount = PercentageDiscount(10, skus=["other-9"])
    assert not discount.applies_to(LineItem(PEN, 1))


def test_fixed_discount_never_below_zero():
    assert FixedDiscount(Money("5.00")).amount(LineItem(PEN, 2)) == Money("4.00")


def test_bulk_discount_applies_above_threshold():
    assert BulkDiscount(min_quantity=10, percent=5).applies_to(LineItem(PEN, 12))


def test_bulk_discount_not_below_threshold():
    assert not BulkDiscount(min_quantity=10, percent=5).applies_to(LineItem(PEN, 3))


def test_best_discount_picks_largest():
    small, large = PercentageDiscount(5), FixedDiscount(Money("1.00"))
    assert best_discount([small, large], LineItem(PEN, 2)) is large
