"""Exceptions raised by invcalc."""


class InvcalcError(Exception):
    """Base class of every error raised by invcalc."""


class CurrencyMismatch(InvcalcError, ValueError):
    """Two amounts in different currencies were combined."""


class UnknownProduct(InvcalcError, KeyError):
    """No product with that SKU is in the catalog."""


class UnknownTaxCategory(InvcalcError, KeyError):
    """No tax rate is defined for that tax category."""


class InsufficientStock(InvcalcError):
    """A reservation asked for more units than are available."""

    def __init__(self, sku, requested, available):
        super().__init__(f"cannot reserve {requested} x {sku}: only {available} available")
        self.sku = sku
        self.requested = requested
        self.available = available
