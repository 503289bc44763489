"""Order storage. In memory for now; the interface is what a database-backed one will keep."""

from __future__ import annotations

import copy

from orders.models import Order


class OrderNotFound(KeyError):
    """No order with that id."""


class InMemoryOrderRepository:
    """Stores copies of orders, so callers cannot change stored state by accident."""

    def __init__(self, id_prefix: str = "ord") -> None:
        self._orders: dict[str, Order] = {}
        self._prefix = id_prefix
        self._sequence = 0

    def __len__(self) -> int:
        return len(self._orders)

    def next_id(self) -> str:
        self._sequence += 1
        return f"{self._prefix}-{self._sequence:06d}"

    def add(self, order: Order) -> None:
        if order.order_id in self._orders:
            raise ValueError(f"order {order.order_id} already exists")
        self._orders[order.order_id] = copy.deepcopy(order)

    def get(self, order_id: str) -> Order:
        try:
            return copy.deepcopy(self._orders[order_id])
        except KeyError:
            raise OrderNotFound(order_id) from None

    def update(self, order: Order) -> None:
        if order.order_id not in self._orders:
            raise OrderNotFound(order.order_id)
        self._orders[order.order_id] = copy.deepcopy(order)

    def remove(self, order_id: str) -> None:
        if self._orders.pop(order_id, None) is None:
            raise OrderNotFound(order_id)

    def list_for_customer(self, customer_id: str) -> list[Order]:
        orders = [o for o in self._orders.values() if o.customer_id == customer_id]
        return [copy.deepcopy(o) for o in sorted(orders, key=lambda o: o.order_id)]
