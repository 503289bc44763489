"""Shared fixtures: a fake HTTP transport, a fixed clock and a small catalogue."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime

import pytest

from orders.clock import FixedClock
from orders.inventory import Inventory, StockItem
from orders.notifications import NotificationClient
from orders.repository import InMemoryOrderRepository

NOTIFY_URL = "http://notify.test"


class RecordingTransport:
    """Stands in for the network: records requests and answers from a queue of replies.

    A reply is ``(status, body_dict)`` or an exception to raise. With no reply queued it
    answers 201 with a fresh notification id.
    """

    def __init__(self) -> None:
        self.requests: list[urllib.request.Request] = []
        self.replies: list[tuple[int, dict[str, object]] | Exception] = []

    def __call__(self, request: urllib.request.Request, timeout: float) -> tuple[int, bytes]:
        self.requests.append(request)
        if self.replies:
            reply = self.replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            status, body = reply
            return status, json.dumps(body).encode()
        return 201, json.dumps({"data": {"id": f"ntf-{len(self.requests)}"}}).encode()

    def fail_next(self, reason: str = "connection refused") -> None:
        self.replies.append(urllib.error.URLError(reason))

    def payloads(self) -> list[dict[str, object]]:
        return [json.loads(r.data) for r in self.requests]  # type: ignore[arg-type]


@pytest.fixture
def transport() -> RecordingTransport:
    return RecordingTransport()


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(datetime(2024, 3, 1, 9, 30, tzinfo=UTC))


@pytest.fixture
def catalog() -> list[StockItem]:
    return [
        StockItem("MUG-RED", unit_price_cents=1250, available=10),
        StockItem("TEE-L", unit_price_cents=2000, available=5),
        StockItem("POSTER-A2", unit_price_cents=899, available=2),
    ]


@pytest.fixture
def inventory(catalog: list[StockItem]) -> Inventory:
    return Inventory(catalog)


@pytest.fixture
def repository() -> InMemoryOrderRepository:
    return InMemoryOrderRepository()


@pytest.fixture
def notifier(transport: RecordingTransport) -> NotificationClient:
    return NotificationClient(NOTIFY_URL, transport=transport, api_key="test-key")
