"""Domain objects: an order and its lines. Money is always integer cents."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class OrderStatus(StrEnum):
    """Lifecycle of an order."""

    PENDING = "pending"
    CONFIRMED = "confirmed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class LineRequest:
    """One requested line: what the customer asked for, before prices are known."""

    sku: str
    quantity: int


@dataclass(frozen=True)
class OrderRequest:
    """An incoming order, as the API layer hands it to the service."""

    customer_id: str
    lines: tuple[LineRequest, ...]
    coupon: str | None = None


@dataclass(frozen=True)
class OrderLine:
    """A priced line of a stored order."""

    sku: str
    quantity: int
    unit_price_cents: int

    @property
    def total_cents(self) -> int:
        return self.quantity * self.unit_price_cents


@dataclass
class Order:
    """A stored order with its price breakdown."""

    order_id: str
    customer_id: str
    lines: list[OrderLine]
    created_at: datetime
    currency: str = "EUR"
    status: OrderStatus = OrderStatus.PENDING
    subtotal_cents: int = 0
    discount_cents: int = 0
    tax_cents: int = 0
    total_cents: int = 0
    coupon: str | None = None
    notification_id: str | None = None
    tags: list[str] = field(default_factory=list)

    @property
    def item_count(self) -> int:
        return sum(line.quantity for line in self.lines)

    @property
    def skus(self) -> tuple[str, ...]:
        return tuple(line.sku for line in self.lines)
