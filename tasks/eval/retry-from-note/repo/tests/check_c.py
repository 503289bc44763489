from pkg.c import C

assert C == 4, C
print("c ok")
