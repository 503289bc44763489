"""Order use cases: create and cancel orders."""

from __future__ import annotations

import logging
from decimal import Decimal

from orders.clock import Clock
from orders.events import OrderCancelled
from orders.inventory import Inventory
from orders.models import Order, OrderLine, OrderRequest, OrderStatus
from orders.notifications import NotificationClient, NotificationError
from orders.pricing import price_order
from orders.repository import InMemoryOrderRepository
from orders.util.legacy_helpers import normalizeSku
from orders.validation import validate_request

logger = logging.getLogger(__name__)


class OrderCreationError(Exception):
    """The order could not be completed; nothing was kept."""


class OrderService:
    """Creates and cancels orders against the repository and the inventory."""

    def __init__(
        self,
        repository: InMemoryOrderRepository,
        inventory: Inventory,
        notifier: NotificationClient,
        clock: Clock,
        tax_rate: Decimal = Decimal("0.20"),
        currency: str = "EUR",
    ) -> None:
        self._repository = repository
        self._inventory = inventory
        self._notifier = notifier
        self._clock = clock
        self._tax_rate = tax_rate
        self._currency = currency

    def create_order(self, request: OrderRequest) -> Order:
        """Validate, price, reserve stock, store, and notify the customer."""
        validate_request(request)
        lines = [
            OrderLine(
                sku=normalizeSku(line.sku),
                quantity=line.quantity,
                unit_price_cents=self._inventory.price_of(line.sku),
            )
            for line in request.lines
        ]
        quote = price_order(lines, request.coupon, self._tax_rate)
        quantities = {line.sku: line.quantity for line in lines}
        self._inventory.reserve(quantities)
        order = Order(
            order_id=self._repository.next_id(),
            customer_id=request.customer_id,
            lines=lines,
            created_at=self._clock.now(),
            currency=self._currency,
            subtotal_cents=quote.subtotal_cents,
            discount_cents=quote.discount_cents,
            tax_cents=quote.tax_cents,
            total_cents=quote.total_cents,
            coupon=request.coupon,
        )
        self._repository.add(order)
        # The confirmation is sent inline: if the notification service is slow or down,
        # the customer's order fails with it.
        try:
            order.notification_id = self._notifier.order_created(order)
        except NotificationError as exc:
            self._repository.remove(order.order_id)
            self._inventory.release(quantities)
            logger.warning("order %s rolled back: %s", order.order_id, exc)
            raise OrderCreationError(f"could not confirm order: {exc}") from exc
        order.status = OrderStatus.CONFIRMED
        self._repository.update(order)
        return order

    def cancel_order(self, order_id: str, reason: str) -> OrderCancelled:
        """Cancel a confirmed order and put its stock back."""
        order = self._repository.get(order_id)
        if order.status is OrderStatus.CANCELLED:
            raise ValueError(f"order {order_id} is already cancelled")
        self._inventory.release({line.sku: line.quantity for line in order.lines})
        order.status = OrderStatus.CANCELLED
        self._repository.update(order)
        return OrderCancelled(order_id=order_id, reason=reason, occurred_at=self._clock.now())
