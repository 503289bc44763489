"""Stock report lines."""

from lib.helpers import normalize_sku


def report_line(raw_sku, count):
    return f"{normalize_sku(raw_sku)}: {count}"
