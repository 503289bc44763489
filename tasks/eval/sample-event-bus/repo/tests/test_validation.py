import pytest

from orders.models import LineRequest, OrderRequest
from orders.validation import ValidationError, problems_in, validate_request


def test_valid_request_passes() -> None:
    validate_request(OrderRequest("cus_abcd", (LineRequest("mug red", 2),)))


def test_every_problem_is_reported() -> None:
    request = OrderRequest(
        "customer-1",
        (LineRequest("MUG-RED", 0), LineRequest("mug_red", 1), LineRequest("bad/sku", 1)),
    )
    problems = problems_in(request)

    assert problems == [
        "bad customer id 'customer-1'",
        "line 0: quantity must be 1..99, got 0",
        "line 1: SKU MUG-RED appears twice",
        "line 2: bad SKU 'bad/sku'",
    ]
    with pytest.raises(ValidationError) as info:
        validate_request(request)
    assert info.value.problems == problems


def test_empty_order_is_rejected() -> None:
    assert problems_in(OrderRequest("cus_abcd", ())) == ["an order needs at least one line"]
