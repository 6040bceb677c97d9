"""Tax rates per tax category."""

from decimal import Decimal

from invcalc.errors import UnknownTaxCategory
from invcalc.money import to_decimal


class TaxTable:
    """Maps a tax category (``"standard"``, ``"reduced"``, ``"zero"``...) to a rate such as ``"0.20"``."""

    def __init__(self, rates):
        self.rates = {category: to_decimal(rate) for category, rate in rates.items()}
        for category, rate in self.rates.items():
            if not Decimal(0) <= rate < Decimal(1):
                raise ValueError(f"tax rate for {category!r} must be a fraction within [0, 1), got {rate}")

    def rate_for(self, category):
        try:
            return self.rates[category]
        except KeyError:
            raise UnknownTaxCategory(category) from None

    def tax_for(self, net, category):
        """Tax due on the net amount ``net``, rounded to cents."""
        return (net * self.rate_for(category)).quantize()
