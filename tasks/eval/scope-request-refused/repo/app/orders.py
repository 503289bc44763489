"""Order lines."""

from lib.helpers import format_price


def order_line(sku, cents):
    return f"{sku} {format_price(cents)}"
