def total() -> int:
    return 1
