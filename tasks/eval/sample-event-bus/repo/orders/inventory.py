"""Stock levels and catalogue prices, kept in memory (the warehouse system syncs it nightly)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from orders.util.legacy_helpers import normalizeSku


class UnknownSku(KeyError):
    """The SKU is not in the catalogue."""


class OutOfStock(Exception):
    """Not enough units to reserve."""

    def __init__(self, sku: str, requested: int, available: int) -> None:
        super().__init__(f"{sku}: requested {requested}, only {available} available")
        self.sku = sku
        self.requested = requested
        self.available = available


@dataclass
class StockItem:
    """One catalogue entry with its current availability."""

    sku: str
    unit_price_cents: int
    available: int


class Inventory:
    """Catalogue prices and stock; reservations are all-or-nothing per order."""

    def __init__(self, items: Iterable[StockItem] = ()) -> None:
        self._items: dict[str, StockItem] = {}
        for item in items:
            self.add(item)

    def add(self, item: StockItem) -> None:
        sku = normalizeSku(item.sku)
        self._items[sku] = StockItem(sku, item.unit_price_cents, item.available)

    def _item(self, sku: str) -> StockItem:
        try:
            return self._items[normalizeSku(sku)]
        except KeyError:
            raise UnknownSku(sku) from None

    def price_of(self, sku: str) -> int:
        return self._item(sku).unit_price_cents

    def available(self, sku: str) -> int:
        return self._item(sku).available

    def reserve(self, quantities: dict[str, int]) -> None:
        """Take the given units out of stock, or nothing at all if any SKU falls short."""
        for sku, qty in quantities.items():
            item = self._item(sku)
            if item.available < qty:
                raise OutOfStock(item.sku, qty, item.available)
        for sku, qty in quantities.items():
            self._item(sku).available -= qty

    def release(self, quantities: dict[str, int]) -> None:
        """Put units back (a cancelled or failed order)."""
        for sku, qty in quantities.items():
            self._item(sku).available += qty
