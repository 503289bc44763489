"""Service settings."""

TIMEOUT_SECONDS = 10
