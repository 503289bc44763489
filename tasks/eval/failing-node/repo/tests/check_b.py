from pkg.b import B

assert B == 3, B
print("b ok")
