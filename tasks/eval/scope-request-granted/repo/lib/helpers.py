"""Shared helpers used across the code base."""


def format_price(cents):
    return f"{cents / 100:.2f} EUR"


def normalize_sku(raw):
    return raw.strip().upper().replace(" ", "-")
