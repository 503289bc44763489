from datetime import UTC, datetime

from orders.models import Order, OrderLine, OrderStatus


def test_line_total_and_order_counts() -> None:
    lines = [OrderLine("MUG-RED", 3, 1250), OrderLine("TEE-L", 1, 2000)]
    order = Order("ord-1", "cus_abcd", lines, created_at=datetime(2024, 1, 1, tzinfo=UTC))

    assert lines[0].total_cents == 3750
    assert order.item_count == 4
    assert order.skus == ("MUG-RED", "TEE-L")
    assert order.status is OrderStatus.PENDING
