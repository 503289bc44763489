"""The orders service: validate, price, reserve stock, store, and confirm customer orders."""

__version__ = "0.4.2"
