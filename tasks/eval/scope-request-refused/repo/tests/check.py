from app.orders import order_line

assert order_line("MUG-RED", 1250) == "MUG-RED \u20ac12.50", order_line("MUG-RED", 1250)
print("ok")
