from src.orders import checkout, checkout_many

assert checkout(100) >= 100
assert checkout_many([100, 200]) >= 300
print("orders ok")
