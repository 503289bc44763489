from lib import util

assert util.helper() == 2
print("util ok")
