from lib.util import SAFE
from src.app.main import VERSION

assert VERSION == "1.1", VERSION
assert SAFE is True
print("ok")
