from datetime import UTC, datetime

import pytest

from orders.clock import FixedClock
from orders.inventory import Inventory, OutOfStock
from orders.models import LineRequest, OrderRequest, OrderStatus
from orders.notifications import NotificationClient
from orders.repository import InMemoryOrderRepository
from orders.service import OrderCreationError, OrderService
from orders.validation import ValidationError


@pytest.fixture
def service(
    repository: InMemoryOrderRepository,
    inventory: Inventory,
    notifier: NotificationClient,
    clock: FixedClock,
) -> OrderService:
    return OrderService(repository, inventory, notifier, clock)


def _request(*lines: tuple[str, int], coupon: str | None = None) -> OrderRequest:
    return OrderRequest("cus_abcd", tuple(LineRequest(s, q) for s, q in lines), coupon)


def test_create_order_prices_reserves_and_stores(
    service: OrderService, repository: InMemoryOrderRepository, inventory: Inventory
) -> None:
    order = service.create_order(_request(("mug red", 2), ("TEE-L", 1), coupon="WELCOME10"))

    assert order.order_id == "ord-000001"
    assert order.created_at == datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
    assert [line.sku for line in order.lines] == ["MUG-RED", "TEE-L"]
    assert order.total_cents == 4860
    assert repository.get(order.order_id).status is OrderStatus.CONFIRMED
    assert inventory.available("MUG-RED") == 8


def test_create_order_notifies_the_customer(service: OrderService, transport) -> None:
    order = service.create_order(_request(("POSTER-A2", 1)))

    assert order.notification_id == "ntf-1"
    assert [p["order_id"] for p in transport.payloads()] == [order.order_id]


def test_notification_outage_rolls_the_order_back(
    service: OrderService, transport, repository: InMemoryOrderRepository, inventory: Inventory
) -> None:
    transport.fail_next()
    with pytest.raises(OrderCreationError, match="could not confirm order"):
        service.create_order(_request(("TEE-L", 2)))

    assert len(repository) == 0
    assert inventory.available("TEE-L") == 5


def test_invalid_or_unavailable_orders_touch_nothing(
    service: OrderService, transport, inventory: Inventory
) -> None:
    with pytest.raises(ValidationError):
        service.create_order(_request(("TEE-L", 0)))
    with pytest.raises(OutOfStock):
        service.create_order(_request(("POSTER-A2", 3)))

    assert transport.requests == []
    assert inventory.available("POSTER-A2") == 2


def test_cancel_order_releases_stock_and_returns_event(
    service: OrderService, inventory: Inventory, clock: FixedClock
) -> None:
    order = service.create_order(_request(("MUG-RED", 4)))
    clock.advance(60)
    event = service.cancel_order(order.order_id, "changed my mind")

    assert inventory.available("MUG-RED") == 10
    assert event.to_dict() == {
        "name": "order_cancelled",
        "occurred_at": "2024-03-01T09:31:00+00:00",
        "order_id": order.order_id,
        "reason": "changed my mind",
    }
    with pytest.raises(ValueError, match="already cancelled"):
        service.cancel_order(order.order_id, "again")
