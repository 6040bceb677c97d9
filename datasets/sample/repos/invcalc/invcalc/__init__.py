"""invcalc: inventory and pricing with exact decimal money."""

from invcalc.cart import Cart, LineItem
from invcalc.catalog import Catalog, Product
from invcalc.discounts import BulkDiscount, Discount, FixedDiscount, PercentageDiscount
from invcalc.errors import CurrencyMismatch, InsufficientStock, InvcalcError, UnknownProduct, UnknownTaxCategory
from invcalc.money import Money
from invcalc.stock import Inventory
from invcalc.tax import TaxTable

__version__ = "1.2.0"

__all__ = [
    "BulkDiscount",
    "Cart",
    "Catalog",
    "CurrencyMismatch",
    "Discount",
    "FixedDiscount",
    "InsufficientStock",
    "InvcalcError",
    "Inventory",
    "LineItem",
    "Money",
    "PercentageDiscount",
    "Product",
    "TaxTable",
    "UnknownProduct",
    "UnknownTaxCategory",
]
