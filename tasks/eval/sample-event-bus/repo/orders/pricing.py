"""Order pricing: line totals, coupons, tax. Everything in integer cents, rounded half-up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from orders.models import OrderLine
from orders.util.legacy_helpers import to_cents


class PricingError(ValueError):
    """The order cannot be priced (unknown coupon, coupon not applicable)."""


@dataclass(frozen=True)
class Coupon:
    """A discount code: either a percentage or a fixed amount, with a minimum subtotal."""

    code: str
    percent_off: int = 0
    amount_off: str = "0"
    minimum: str = "0"


COUPONS: dict[str, Coupon] = {
    "WELCOME10": Coupon("WELCOME10", percent_off=10),
    "FIVEOFF": Coupon("FIVEOFF", amount_off="5.00", minimum="25.00"),
}


@dataclass(frozen=True)
class PriceQuote:
    """The price breakdown of an order."""

    subtotal_cents: int
    discount_cents: int
    tax_cents: int

    @property
    def total_cents(self) -> int:
        return self.subtotal_cents - self.discount_cents + self.tax_cents


def _round(value: Decimal) -> int:
    return int(value.quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def discount_for(coupon_code: str | None, subtotal_cents: int) -> int:
    """The discount in cents a coupon gives on ``subtotal_cents`` (0 without a coupon)."""
    if not coupon_code:
        return 0
    coupon = COUPONS.get(coupon_code.strip().upper())
    if coupon is None:
        raise PricingError(f"unknown coupon {coupon_code!r}")
    if subtotal_cents < to_cents(coupon.minimum):
        raise PricingError(f"coupon {coupon.code} needs a subtotal of at least {coupon.minimum}")
    if coupon.percent_off:
        return _round(Decimal(subtotal_cents) * coupon.percent_off / 100)
    return min(to_cents(coupon.amount_off), subtotal_cents)


def price_order(
    lines: Sequence[OrderLine], coupon_code: str | None, tax_rate: Decimal
) -> PriceQuote:
    """Subtotal, then discount, then tax on the discounted amount."""
    subtotal = sum(line.total_cents for line in lines)
    discount = discount_for(coupon_code, subtotal)
    tax = _round(Decimal(subtotal - discount) * tax_rate)
    return PriceQuote(subtotal_cents=subtotal, discount_cents=discount, tax_cents=tax)
