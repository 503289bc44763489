from greet.hello import hello

assert hello("Ada") == "Hello Ada"
print("hello ok")
