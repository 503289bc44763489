from app.orders import order_line
from lib.report import report_line

assert order_line("MUG-RED", 1250, 2) == "2 x MUG-RED 12.50 EUR", order_line("MUG-RED", 1250, 2)
assert report_line("tee l", 3) == "TEE-L: 3"
print("ok")
