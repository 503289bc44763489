"""Greetings."""


def hello(name):
    return f"Hello {name}"
