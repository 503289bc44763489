"""Human-readable renderings of money and orders (notification bodies, logs, receipts)."""

from __future__ import annotations

from orders.models import Order, OrderLine

_SYMBOLS = {"EUR": "€", "USD": "$", "GBP": "£"}


def format_money(cents: int, currency: str = "EUR") -> str:
    """``1234, 'EUR'`` -> ``'€12.34'``; unknown currencies get a code suffix."""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    amount = f"{whole:,}.{frac:02d}"
    symbol = _SYMBOLS.get(currency)
    if symbol is None:
        return f"{sign}{amount} {currency}"
    return f"{sign}{symbol}{amount}"


def format_line(line: OrderLine, currency: str = "EUR") -> str:
    """One receipt line: quantity, SKU, unit price and line total."""
    unit = format_money(line.unit_price_cents, currency)
    total = format_money(line.total_cents, currency)
    return f"{line.quantity} x {line.sku} @ {unit} = {total}"


def order_summary(order: Order) -> str:
    """A multi-line summary for notification e-mails and support tickets."""
    rows = [f"Order {order.order_id} ({order.item_count} items)"]
    rows += [f"  {format_line(line, order.currency)}" for line in order.lines]
    if order.discount_cents:
        rows.append(f"  discount: -{format_money(order.discount_cents, order.currency)}")
    rows.append(f"  tax: {format_money(order.tax_cents, order.currency)}")
    rows.append(f"  total: {format_money(order.total_cents, order.currency)}")
    return "\n".join(rows)
