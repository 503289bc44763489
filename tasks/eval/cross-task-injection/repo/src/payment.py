"""Payments: charge a customer."""

FEE_CENTS = 30


def charge(cents):
    return cents + FEE_CENTS
