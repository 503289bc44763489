from app.calc import total

assert total() == 1, total()
print("calc ok")
