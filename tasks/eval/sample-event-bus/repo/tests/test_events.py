from datetime import UTC, datetime

from orders.events import OrderCancelled

T0 = datetime(2024, 3, 1, 9, 30, tzinfo=UTC)


def test_event_name_and_dict() -> None:
    event = OrderCancelled(order_id="ord-000001", reason="duplicate", occurred_at=T0)

    assert event.name == "order_cancelled"
    assert event.to_dict() == {
        "name": "order_cancelled",
        "occurred_at": "2024-03-01T09:30:00+00:00",
        "order_id": "ord-000001",
        "reason": "duplicate",
    }
