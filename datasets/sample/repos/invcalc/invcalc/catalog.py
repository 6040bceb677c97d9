"""Products and the catalog they are looked up in. SKUs are case-insensitive."""

from dataclasses import dataclass

from invcalc.errors import UnknownProduct
from invcalc.money import Money


def normalize_sku(sku):
    """Canonical SKU: trimmed, upper case (``" ab-1 "`` -> ``"AB-1"``)."""
    return sku.strip().upper()


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    unit_price: Money
    tax_category: str = "standard"

    def __post_init__(self):
        object.__setattr__(self, "sku", normalize_sku(self.sku))


class Catalog:
    def __init__(self, products=()):
        self._products = {}
        for product in products:
            self.add(product)

    def add(self, product):
        self._products[product.sku] = product

    def get(self, sku):
        try:
            return self._products[normalize_sku(sku)]
        except KeyError:
            raise UnknownProduct(sku) from None

    def __contains__(self, sku):
        return normalize_sku(sku) in self._products

    def __len__(self):
        return len(self._products)

    def search(self, term):
        """Products whose name contains ``term`` (case-insensitive), sorted by SKU."""
        needle = term.casefold()
        return sorted((p for p in self._products.values() if needle in p.name.casefold()), key=lambda p: p.sku)
