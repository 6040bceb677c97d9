import pytest

from invcalc.catalog import Catalog, Product
from invcalc.errors import UnknownProduct
from invcalc.money import Money


def make_catalog():
    return Catalog([
        Product("tea-1", "Green tea", Money("4.50"), "reduced"),
        Product("MUG-2", "Tea mug", Money("8.00")),
    ])


def test_sku_lookup_is_case_insensitive():
    catalog = make_catalog()
    assert catalog.get("TEA-1").name == "Green tea"
    assert "mug-2" in catalog


def test_unknown_sku_raises():
    with pytest.raises(UnknownProduct):
        make_catalog().get("NOPE")


def test_search_by_name():
    assert [p.sku for p in make_catalog().search("tea")] == ["MUG-2", "TEA-1"]
