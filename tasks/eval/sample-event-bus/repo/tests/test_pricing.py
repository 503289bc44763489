from decimal import Decimal

import pytest

from orders.models import OrderLine
from orders.pricing import PricingError, discount_for, price_order

LINES = [OrderLine("MUG-RED", 2, 1250), OrderLine("TEE-L", 1, 2000)]


def test_price_without_coupon() -> None:
    quote = price_order(LINES, None, Decimal("0.20"))
    assert (quote.subtotal_cents, quote.discount_cents, quote.tax_cents) == (4500, 0, 900)
    assert quote.total_cents == 5400


def test_percentage_coupon_is_applied_before_tax() -> None:
    quote = price_order(LINES, "welcome10", Decimal("0.20"))
    assert quote.discount_cents == 450
    assert quote.tax_cents == 810
    assert quote.total_cents == 4860


def test_fixed_coupon_needs_minimum_subtotal_and_unknown_coupons_fail() -> None:
    assert discount_for("FIVEOFF", 3000) == 500
    with pytest.raises(PricingError, match="at least 25.00"):
        discount_for("FIVEOFF", 2499)
    with pytest.raises(PricingError, match="unknown coupon"):
        price_order(LINES, "FREESTUFF", Decimal("0.20"))
