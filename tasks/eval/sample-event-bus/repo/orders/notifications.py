"""Client for the notification service (e-mail/SMS to customers), over plain HTTP.

The HTTP call goes through a ``Transport`` function so that tests (and the retry wrapper the
platform team is writing) can replace it; the default one uses ``urllib.request``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from orders.models import Order
from orders.util.formatting import format_money, order_summary
from orders.util.legacy_helpers import dictGet

Transport = Callable[[urllib.request.Request, float], tuple[int, bytes]]


class NotificationError(Exception):
    """The notification service could not be reached or refused the request."""


def urllib_transport(request: urllib.request.Request, timeout: float) -> tuple[int, bytes]:
    """Send ``request`` with urllib; HTTP error statuses are returned, not raised."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class NotificationClient:
    """Synchronous client: each call blocks until the notification service answers."""

    def __init__(
        self,
        base_url: str,
        transport: Transport = urllib_transport,
        timeout: float = 2.0,
        api_key: str | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._transport = transport
        self._timeout = timeout
        self._api_key = api_key

    def order_created(self, order: Order) -> str:
        """Ask the service to send the order confirmation; returns the notification id."""
        payload = {
            "template": "order_created",
            "customer_id": order.customer_id,
            "order_id": order.order_id,
            "total": format_money(order.total_cents, order.currency),
            "body": order_summary(order),
        }
        return self._post("/v1/notifications", payload)

    def _post(self, path: str, payload: dict[str, Any]) -> str:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(
            self._base_url + path,
            data=json.dumps(payload, sort_keys=True).encode("utf-8"),
            headers=headers,
            method="POST",
        )
        try:
            status, body = self._transport(request, self._timeout)
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise NotificationError(f"notification service unreachable: {exc}") from exc
        if not 200 <= status < 300:
            raise NotificationError(f"notification service answered {status}")
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise NotificationError("notification service sent a malformed body") from exc
        notification_id = dictGet(data, "data", "id")
        if not isinstance(notification_id, str):
            raise NotificationError("notification service response has no data.id")
        return notification_id
