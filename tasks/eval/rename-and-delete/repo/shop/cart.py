"""A cart total."""

from shop.util import format_price


def total(lines):
    return format_price(sum(cents * qty for cents, qty in lines))
