"""Carts: lines of products with quantities, priced with the catalog, discounts and tax table."""

from dataclasses import dataclass

from invcalc.catalog import Catalog, Product
from invcalc.discounts import best_discount
from invcalc.money import Money


@dataclass
class LineItem:
    product: Product
    quantity: int

    def gross(self):
        return self.product.unit_price * self.quantity


class Cart:
    def __init__(self, catalog: Catalog, tax_table, discounts=(), currency="EUR"):
        self.catalog = catalog
        self.tax_table = tax_table
        self.discounts = list(discounts)
        self.currency = currency
        self.lines = []

    def add(self, sku, quantity=1):
        """Add ``quantity`` units of ``sku``; adding a SKU already in the cart increases its line."""
        if quantity < 1:
            raise ValueError(f"quantity must be at least 1, got {quantity}")
        product = self.catalog.get(sku)
        for line in self.lines:
            if line.product.sku == product.sku:
                line.quantity += quantity
                return line
        line = LineItem(product, quantity)
        self.lines.append(line)
        return line

    def remove(self, sku):
        product = self.catalog.get(sku)
        self.lines = [line for line in self.lines if line.product.sku != product.sku]

    def line_discount(self, line):
        discount = best_discount(self.discounts, line)
        if discount is None:
            return Money.zero(self.currency)
        return discount.amount(line).quantize()

    def line_net(self, line):
        return line.gross().quantize() - self.line_discount(line)

    def subtotal(self):
        return sum((line.gross().quantize() for line in self.lines), Money.zero(self.currency))

    def discount_total(self):
        return sum((self.line_discount(line) for line in self.lines), Money.zero(self.currency))

    def tax_total(self):
        return sum(
            (self.tax_table.tax_for(self.line_net(line), line.product.tax_category) for line in self.lines),
            Money.zero(self.currency),
        )

    def total(self):
        return self.subtotal() - self.discount_total() + self.tax_total()
