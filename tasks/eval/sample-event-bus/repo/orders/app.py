"""Composition root: builds the service with its collaborators from settings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from orders.clock import Clock, SystemClock
from orders.config import Settings
from orders.inventory import Inventory, StockItem
from orders.notifications import NotificationClient, Transport, urllib_transport
from orders.repository import InMemoryOrderRepository
from orders.service import OrderService


@dataclass
class OrdersApp:
    """The wired application; the HTTP layer only talks to ``service``."""

    service: OrderService
    repository: InMemoryOrderRepository
    inventory: Inventory
    notifier: NotificationClient


def build_app(
    settings: Settings,
    catalog: Iterable[StockItem] = (),
    transport: Transport = urllib_transport,
    clock: Clock | None = None,
) -> OrdersApp:
    """Wire repository, inventory, notification client and service."""
    repository = InMemoryOrderRepository()
    inventory = Inventory(catalog)
    notifier = NotificationClient(
        settings.notification_base_url,
        transport=transport,
        timeout=settings.notification_timeout,
        api_key=settings.notification_api_key,
    )
    service = OrderService(
        repository,
        inventory,
        notifier,
        clock or SystemClock(),
        tax_rate=settings.tax_rate,
        currency=settings.currency,
    )
    return OrdersApp(service=service, repository=repository, inventory=inventory, notifier=notifier)
