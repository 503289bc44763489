"""Checks on an incoming order request before anything is reserved or stored."""

from __future__ import annotations

import re

from orders.models import LineRequest, OrderRequest
from orders.util.legacy_helpers import normalizeSku

MAX_LINES = 50
MAX_QUANTITY = 99
_SKU = re.compile(r"^[A-Z0-9]+(-[A-Z0-9]+)*$")
_CUSTOMER = re.compile(r"^cus_[a-z0-9]{4,32}$")


class ValidationError(ValueError):
    """The request is malformed; ``problems`` lists every reason, not just the first."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def problems_in(request: OrderRequest) -> list[str]:
    """Every problem with ``request`` (empty when it is valid)."""
    problems: list[str] = []
    if not _CUSTOMER.match(request.customer_id):
        problems.append(f"bad customer id {request.customer_id!r}")
    if not request.lines:
        problems.append("an order needs at least one line")
    if len(request.lines) > MAX_LINES:
        problems.append(f"at most {MAX_LINES} lines per order")
    seen: set[str] = set()
    for index, line in enumerate(request.lines):
        problems.extend(_line_problems(index, line, seen))
    return problems


def _line_problems(index: int, line: LineRequest, seen: set[str]) -> list[str]:
    out = []
    sku = normalizeSku(line.sku)
    if not _SKU.match(sku):
        out.append(f"line {index}: bad SKU {line.sku!r}")
    elif sku in seen:
        out.append(f"line {index}: SKU {sku} appears twice")
    seen.add(sku)
    if not 1 <= line.quantity <= MAX_QUANTITY:
        out.append(f"line {index}: quantity must be 1..{MAX_QUANTITY}, got {line.quantity}")
    return out


def validate_request(request: OrderRequest) -> None:
    """Raise ValidationError listing every problem, or return quietly."""
    problems = problems_in(request)
    if problems:
        raise ValidationError(problems)
