"""What a test command's output says: which tests failed, whether any ran, why it could not start.

A suite may fail on a clean checkout (attrs had 21 failing tests): a node is then judged on the
failures it introduces, not on the ones already there (run/baseline.py records them at the
start commit). The failing ids come from pytest's short summary (``FAILED tests/x.py::t - ...``,
``ERROR ...``), shown by default; for another runner (or pytest with ``-rN``) no id is found and
the exit code alone decides, as before.

A command *cannot start* when its program is not found (exit 126/127, bubblewrap's ``execvp``)
or Python cannot import what it needs before any test runs (``No module named ...`` with no
test counted): no write scope can fix that, so it is reported before any token is spent.
"""

from __future__ import annotations

import re
from collections.abc import Collection

__all__ = [
    "PYTEST_TESTS_FAILED",
    "cannot_start",
    "failing_tests",
    "missing_module",
    "only_known_failures",
    "passed_count",
]

PYTEST_TESTS_FAILED = 1  # pytest's exit code when tests ran and some failed
# ``FAILED tests/t.py::test[a b] - AssertionError: ...``: the id may hold spaces, " - " ends it
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S.*?)(?: - .*)?$", re.MULTILINE)
_COUNTED = re.compile(r"\b\d+ (?:passed|failed)\b")
_PASSED = re.compile(r"\b(\d+) passed\b")
_NO_MODULE = re.compile(r"No module named '?([A-Za-z0-9_.]+)'?")
_NOT_FOUND = re.compile(r"execvp [^\n]*: No such file or directory|command not found")


def failing_tests(output: str) -> list[str]:
    """Test ids pytest's short summary lists as failed or errored, each once, in order."""
    return list(dict.fromkeys(_FAILED.findall(output)))


def passed_count(output: str) -> int | None:
    """How many tests pytest's last summary line says passed (None: it names no count)."""
    found = _PASSED.findall(output)
    return int(found[-1]) if found else None


def missing_module(output: str) -> str | None:
    """The first module Python could not import, as the output names it."""
    match = _NO_MODULE.search(output)
    return match.group(1) if match else None


def cannot_start(exit_code: int | None, output: str) -> str | None:
    """Why the command could not start (its program, a missing module), or None."""
    if exit_code == 0 or exit_code is None:
        return None
    if exit_code in (126, 127) or _NOT_FOUND.search(output):
        return "its program was not found"
    module = missing_module(output)
    if module and not _COUNTED.search(output):
        return f"No module named '{module}'"
    return None


def only_known_failures(exit_code: int | None, output: str, known: Collection[str]) -> bool:
    """The run failed only with tests listed in ``known`` (pytest ran and reported each)."""
    if exit_code != PYTEST_TESTS_FAILED or not known:
        return False
    failed = failing_tests(output)
    return bool(failed) and all(test_id in known for test_id in failed)
