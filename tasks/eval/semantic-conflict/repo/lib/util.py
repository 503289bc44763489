def helper() -> int:
    """The shared helper both nodes are about."""
    return 2
