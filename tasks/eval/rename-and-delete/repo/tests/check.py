"""python -m tests.check: the renamed module exists, the obsolete one is gone."""

import importlib.util

from shop.cart import total
from shop.pricing import format_price

assert format_price(1999) == "19.99"
assert total([(250, 2), (100, 1)]) == "6.00"
assert importlib.util.find_spec("shop.util") is None, "shop/util.py should be renamed"
assert importlib.util.find_spec("shop.legacy_tax") is None, "shop/legacy_tax.py should be gone"
print("ok")
