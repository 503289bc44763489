"""Service settings, read once from the environment by the composition root."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation


class ConfigError(ValueError):
    """A setting is missing or malformed."""


@dataclass(frozen=True)
class Settings:
    """Everything the orders service needs to know about its surroundings."""

    notification_base_url: str
    notification_timeout: float = 2.0
    notification_api_key: str | None = None
    tax_rate: Decimal = Decimal("0.20")
    currency: str = "EUR"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build settings from ``ORDERS_*`` variables; only the notification URL is required."""
        url = environ.get("ORDERS_NOTIFICATION_URL", "").strip()
        if not url:
            raise ConfigError("ORDERS_NOTIFICATION_URL is not set")
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"ORDERS_NOTIFICATION_URL must be an http(s) URL, got {url!r}")
        try:
            timeout = float(environ.get("ORDERS_NOTIFICATION_TIMEOUT", "2.0"))
            tax_rate = Decimal(environ.get("ORDERS_TAX_RATE", "0.20"))
        except (ValueError, InvalidOperation) as exc:
            raise ConfigError(f"bad numeric setting: {exc}") from exc
        if not Decimal(0) <= tax_rate < Decimal(1):
            raise ConfigError(f"ORDERS_TAX_RATE must be in [0, 1), got {tax_rate}")
        return cls(
            notification_base_url=url.rstrip("/"),
            notification_timeout=timeout,
            notification_api_key=environ.get("ORDERS_NOTIFICATION_API_KEY") or None,
            tax_rate=tax_rate,
            currency=environ.get("ORDERS_CURRENCY", "EUR").upper(),
        )
