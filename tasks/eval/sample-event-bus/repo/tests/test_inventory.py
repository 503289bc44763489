import pytest

from orders.inventory import Inventory, OutOfStock, UnknownSku


def test_reservation_is_all_or_nothing(inventory: Inventory) -> None:
    with pytest.raises(OutOfStock) as info:
        inventory.reserve({"MUG-RED": 2, "POSTER-A2": 3})

    assert (info.value.sku, info.value.available) == ("POSTER-A2", 2)
    assert inventory.available("MUG-RED") == 10


def test_lookup_normalizes_skus_and_release_restores(inventory: Inventory) -> None:
    assert inventory.price_of(" mug red ") == 1250
    with pytest.raises(UnknownSku):
        inventory.price_of("MUG-BLUE")
    inventory.reserve({"TEE-L": 5})
    assert inventory.available("TEE-L") == 0
    inventory.release({"TEE-L": 2})
    assert inventory.available("TEE-L") == 2
