import pytest

from invcalc.cart import Cart
from invcalc.catalog import Catalog, Product
from invcalc.discounts import PercentageDiscount
from invcalc.errors import UnknownProduct
from invcalc.money import Money
from invcalc.tax import TaxTable

TAXES = TaxTable({"standard": "0.20", "reduced": "0.10", "zero": "0"})


def make_cart(discounts=()):
    catalog = Catalog([
        Product("BOOK-1", "Novel", Money("12.00"), "zero"),
        Product("LAMP-2", "Desk lamp", Money("30.00")),
    ])
    return Cart(catalog, TAXES, discounts)


def test_adding_same_sku_merges_lines():
    cart = make_cart()
    cart.add("book-1")
    cart.add("BOOK-1", 2)
    assert len(cart.lines) == 1 and cart.lines[0].quantity == 3


def test_totals_without_discounts():
    cart = make_cart()
    cart.add("BOOK-1", 2)
    cart.add("LAMP-2")
    assert cart.subtotal() == Money("54.00")
    assert cart.tax_total() == Money("6.00")
    assert cart.total() == Money("60.00")


def test_tax_is_charged_on_discounted_amount():
    cart = make_cart([PercentageDiscount(10, skus=["LAMP-2"])])
    cart.add("LAMP-2")
    assert cart.discount_total() == Money("3.00")
    assert cart.tax_total() == Money("5.40")
    assert cart.total() == Money("32.40")


def test_remove_line():
    cart = make_cart()
    cart.add("LAMP-2")
    cart.remove("lamp-2")
    assert cart.lines == []


def test_unknown_sku_cannot_be_added():
    with pytest.raises(UnknownProduct):
        make_cart().add("GHOST-0")
