"""Obsolete: nothing imports this any more."""

RATE = 0.19
