"""Price helpers (to be renamed to shop/pricing.py)."""


def format_price(cents):
    return f"{cents // 100}.{cents % 100:02d}"
