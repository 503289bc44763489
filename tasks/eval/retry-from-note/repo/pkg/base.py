"""Shared base values."""

BASE = 1
