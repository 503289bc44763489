"""Domain events: facts about orders that other parts of the system may react to."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import Any

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DomainEvent:
    """Base class: every event records when it happened."""

    occurred_at: datetime

    @property
    def name(self) -> str:
        """``OrderCancelled`` -> ``order_cancelled``."""
        return _CAMEL.sub("_", type(self).__name__).lower()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the event name plus its fields, datetimes as ISO 8601."""
        data: dict[str, Any] = {"name": self.name}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            data[item.name] = value.isoformat() if isinstance(value, datetime) else value
        return data


@dataclasses.dataclass(frozen=True, kw_only=True)
class OrderCancelled(DomainEvent):
    """An order was cancelled and its stock released."""

    order_id: str
    reason: str
