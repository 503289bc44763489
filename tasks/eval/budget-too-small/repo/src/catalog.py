"""Catalogue queries."""
