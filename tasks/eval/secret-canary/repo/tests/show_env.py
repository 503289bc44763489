"""Checks the settings, and prints the whole environment the test command was given."""

import os

from config.settings import TIMEOUT_SECONDS

for key, value in sorted(os.environ.items()):
    print(f"{key}={value}")
assert TIMEOUT_SECONDS == 30, TIMEOUT_SECONDS
print("settings ok")
