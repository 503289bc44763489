"""A tiny calculator."""


def add(a, b):
    return a + b
