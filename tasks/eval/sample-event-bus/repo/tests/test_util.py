from datetime import UTC, datetime
from decimal import Decimal

import pytest

from orders.models import Order, OrderLine
from orders.util.formatting import format_money, order_summary
from orders.util.legacy_helpers import chunk, dictGet, normalizeSku, to_cents


def test_format_money() -> None:
    assert format_money(123456) == "€1,234.56"
    assert format_money(-5, "USD") == "-$0.05"
    assert format_money(100, "CHF") == "1.00 CHF"


def test_order_summary_lists_lines_discount_and_total() -> None:
    order = Order(
        "ord-000007",
        "cus_abcd",
        [OrderLine("MUG-RED", 2, 1250)],
        created_at=datetime(2024, 1, 1, tzinfo=UTC),
        discount_cents=250,
        tax_cents=450,
        total_cents=2700,
    )
    assert order_summary(order).splitlines() == [
        "Order ord-000007 (2 items)",
        "  2 x MUG-RED @ €12.50 = €25.00",
        "  discount: -€2.50",
        "  tax: €4.50",
        "  total: €27.00",
    ]


def test_legacy_helpers_keep_their_quirks() -> None:
    assert normalizeSku("  mug__red  ") == "MUG-RED"
    assert normalizeSku(None) == ""
    assert [to_cents("12.345"), to_cents(Decimal("0.5")), to_cents(7), to_cents("1,10")] == [
        1235,
        50,
        7,
        110,
    ]
    with pytest.raises(ValueError):
        to_cents("twelve")
    assert dictGet({"a": {"b": 1}}, "a", "b") == 1
    assert dictGet({"a": []}, "a", "b", default="x") == "x"
    assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
