"""The whole suite: what the integrated branch must pass."""

import tests.check_calc  # noqa: F401
import tests.check_util  # noqa: F401

print("all ok")
