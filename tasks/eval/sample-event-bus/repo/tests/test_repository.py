from datetime import UTC, datetime

import pytest

from orders.models import Order, OrderLine, OrderStatus
from orders.repository import InMemoryOrderRepository, OrderNotFound

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _order(repo: InMemoryOrderRepository, customer: str = "cus_abcd") -> Order:
    return Order(repo.next_id(), customer, [OrderLine("MUG-RED", 1, 1250)], created_at=T0)


def test_ids_are_sequential_and_stored_orders_are_copies() -> None:
    repository = InMemoryOrderRepository(id_prefix="t")
    order = _order(repository)
    assert (order.order_id, repository.next_id()) == ("t-000001", "t-000002")
    repository.add(order)
    order.status = OrderStatus.CANCELLED

    assert repository.get(order.order_id).status is OrderStatus.PENDING


def test_update_remove_and_missing(repository: InMemoryOrderRepository) -> None:
    order = _order(repository)
    repository.add(order)
    order.status = OrderStatus.CONFIRMED
    repository.update(order)
    assert repository.get(order.order_id).status is OrderStatus.CONFIRMED

    repository.remove(order.order_id)
    with pytest.raises(OrderNotFound):
        repository.get(order.order_id)
    with pytest.raises(OrderNotFound):
        repository.remove(order.order_id)


def test_list_for_customer_is_sorted_and_filtered(repository: InMemoryOrderRepository) -> None:
    first, other, second = (_order(repository, c) for c in ("cus_aaaa", "cus_bbbb", "cus_aaaa"))
    for order in (second, other, first):
        repository.add(order)

    listed = repository.list_for_customer("cus_aaaa")
    assert [o.order_id for o in listed] == [first.order_id, second.order_id]
