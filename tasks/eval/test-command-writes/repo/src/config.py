"""Configuration nobody should change from a test."""

VALUE = 1
