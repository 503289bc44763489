from datetime import UTC, datetime

import pytest

from orders.models import Order, OrderLine
from orders.notifications import NotificationClient, NotificationError

ORDER = Order(
    "ord-000042",
    "cus_abcd",
    [OrderLine("MUG-RED", 2, 1250)],
    created_at=datetime(2024, 1, 1, tzinfo=UTC),
    subtotal_cents=2500,
    tax_cents=500,
    total_cents=3000,
)


def test_order_created_posts_json_and_returns_id(notifier: NotificationClient, transport) -> None:
    assert notifier.order_created(ORDER) == "ntf-1"

    (request,) = transport.requests
    assert request.full_url == "http://notify.test/v1/notifications"
    assert request.get_method() == "POST"
    assert request.get_header("Authorization") == "Bearer test-key"
    payload = transport.payloads()[0]
    assert payload["template"] == "order_created"
    assert payload["total"] == "€30.00"
    assert "2 x MUG-RED @ €12.50 = €25.00" in payload["body"]


def test_error_status_raises(notifier: NotificationClient, transport) -> None:
    transport.replies.append((503, {"error": "maintenance"}))
    with pytest.raises(NotificationError, match="answered 503"):
        notifier.order_created(ORDER)


def test_unreachable_service_raises(notifier: NotificationClient, transport) -> None:
    transport.fail_next()
    with pytest.raises(NotificationError, match="unreachable"):
        notifier.order_created(ORDER)


def test_response_without_id_raises(notifier: NotificationClient, transport) -> None:
    transport.replies.append((200, {"data": {}}))
    with pytest.raises(NotificationError, match="no data.id"):
        notifier.order_created(ORDER)
