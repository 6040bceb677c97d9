import pytest

from invcalc.catalog import Catalog, Product
from invcalc.errors import InsufficientStock, UnknownProduct
from invcalc.money import Money
from invcalc.stock import Inventory

CATALOG = Catalog([Product("BOLT-1", "Bolt", Money("0.10")), Product("NUT-1", "Nut", Money("0.05"))])


def test_reserve_and_ship():
    inventory = Inventory(CATALOG, {"BOLT-1": 100})
    inventory.reserve("bolt-1", 40)
    assert inventory.available("BOLT-1") == 60
    inventory.ship("BOLT-1", 40)
    assert inventory.on_hand("BOLT-1") == 60 and inventory.reserved("BOLT-1") == 0


def test_cannot_reserve_more_than_available():
    inventory = Inventory(CATALOG, {"NUT-1": 5})
    with pytest.raises(InsufficientStock):
        inventory.reserve("NUT-1", 6)


def test_receive_adds_to_stock():
    inventory = Inventory(CATALOG, {"NUT-1": 5})
    inventory.receive("NUT-1", 10)
    assert inventory.on_hand("NUT-1") == 15


def test_needs_reorder_at_reorder_point():
    inventory = Inventory(CATALOG, {"BOLT-1": 10, "NUT-1": 50}, reorder_points={"BOLT-1": 10, "NUT-1": 20})
    assert inventory.needs_reorder() == ["BOLT-1"]


def test_unknown_sku_in_levels():
    with pytest.raises(UnknownProduct):
        Inventory(CATALOG, {"SCREW-9": 1})
