from calc.mul import mul

assert mul(2, 3) == 6
print("mul ok")
