from pkg.a import A

assert A == 2, A
print("a ok")
