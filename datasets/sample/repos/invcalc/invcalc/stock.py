"""Stock levels per SKU: receiving, reserving for orders, and reorder points."""

from invcalc.catalog import normalize_sku
from invcalc.errors import InsufficientStock, UnknownProduct


class Inventory:
    """Units on hand and reserved per SKU of ``catalog``."""

    def __init__(self, catalog, levels={}, reorder_points=None):
        self.catalog = catalog
        self._on_hand = levels
        self._reserved = {}
        self.reorder_points = {normalize_sku(s): n for s, n in (reorder_points or {}).items()}
        for sku in self._on_hand:
            self._known(sku)

    def _known(self, sku):
        sku = normalize_sku(sku)
        if sku not in self.catalog:
            raise UnknownProduct(sku)
        return sku

    def on_hand(self, sku):
        return self._on_hand.get(self._known(sku), 0)

    def reserved(self, sku):
        return self._reserved.get(self._known(sku), 0)

    def available(self, sku):
        return self.on_hand(sku) - self.reserved(sku)

    def receive(self, sku, quantity):
        """Book ``quantity`` delivered units of ``sku``."""
        if quantity < 1:
            raise ValueError(f"quantity must be at least 1, got {quantity}")
        sku = self._known(sku)
        self._on_hand[sku] = self._on_hand.get(sku, 0) + quantity

    def reserve(self, sku, quantity):
        """Hold ``quantity`` units for an order; raises InsufficientStock if not enough are available."""
        sku = self._known(sku)
        if quantity > self.available(sku):
            raise InsufficientStock(sku, quantity, self.available(sku))
        self._reserved[sku] = self._reserved.get(sku, 0) + quantity

    def ship(self, sku, quantity):
        """Ship reserved units: they leave both the reservation and the stock on hand."""
        sku = self._known(sku)
        if quantity > self.reserved(sku):
            raise ValueError(f"cannot ship {quantity} x {sku}: only {self.reserved(sku)} reserved")
        self._reserved[sku] -= quantity
        self._on_hand[sku] -= quantity

    def needs_reorder(self):
        """SKUs whose available units are at or below their reorder point, sorted."""
        return sorted(sku for sku, point in self.reorder_points.items() if self.available(sku) <= point)
