from decimal import Decimal

import pytest

from orders.config import ConfigError, Settings


def test_from_env_reads_and_normalizes() -> None:
    settings = Settings.from_env(
        {
            "ORDERS_NOTIFICATION_URL": "https://notify.internal/",
            "ORDERS_TAX_RATE": "0.07",
            "ORDERS_CURRENCY": "usd",
        }
    )
    assert settings.notification_base_url == "https://notify.internal"
    assert settings.tax_rate == Decimal("0.07")
    assert settings.currency == "USD"
    assert settings.notification_api_key is None


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({}, "is not set"),
        ({"ORDERS_NOTIFICATION_URL": "http://n", "ORDERS_TAX_RATE": "1.5"}, "TAX_RATE"),
        ({"ORDERS_NOTIFICATION_URL": "http://n", "ORDERS_NOTIFICATION_TIMEOUT": "x"}, "numeric"),
    ],
)
def test_from_env_rejects_bad_settings(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(environ)
