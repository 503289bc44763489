"""Orders."""

from src.payment import charge


def checkout(cents):
    return charge(cents)
