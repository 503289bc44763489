"""Helpers carried over from the first storefront (2017).

Several modules depend on the exact behaviour below (validation, inventory, pricing and the
notification client). Changing a name or an edge case here means checking every caller.
"""

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation


def normalizeSku(sku):
    # the old storefront sent SKUs in any case, with spaces, and sometimes with "--"
    if sku is None:
        return ""
    s = str(sku)
    s = s.strip()
    s = s.upper()
    s = s.replace(" ", "-")
    s = s.replace("_", "-")
    while "--" in s:
        s = s.replace("--", "-")
    return s


def to_cents(amount):
    """'12.34' / Decimal('12.34') / 12.34 -> 1234. Ints are taken to be cents already (!)."""
    if amount is None:
        return 0
    if isinstance(amount, bool):
        raise TypeError("to_cents got a bool")
    if isinstance(amount, int):
        return amount
    try:
        d = Decimal(str(amount).strip().replace(",", "."))
    except InvalidOperation:
        raise ValueError("not an amount: %r" % (amount,))
    return int((d * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def dictGet(d, *keys, **kw):
    # nested get that never raises: dictGet(resp, "data", "id", default=None)
    default = kw.get("default", None)
    cur = d
    for k in keys:
        if isinstance(cur, dict) and k in cur:
            cur = cur[k]
        else:
            return default
    return cur


def chunk(seq, n):
    out = []
    i = 0
    while i < len(seq):
        out.append(seq[i:i + n])
        i = i + n
    return out
