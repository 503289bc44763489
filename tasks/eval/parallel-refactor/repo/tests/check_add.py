from calc.add import add

assert add(2, 3) == 5
print("add ok")
