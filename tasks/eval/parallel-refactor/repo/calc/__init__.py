"""A tiny calculator library."""

from calc.add import add
from calc.mul import mul

__all__ = ["add", "mul"]
