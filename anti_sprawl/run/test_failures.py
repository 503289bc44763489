"""What a test command's output says: which tests failed, whether any ran, why it could not start.

A suite may fail on a clean checkout (attrs had 21 failing tests): a node is then judged on the
failures it introduces, not on the ones already there (run/baseline.py records them at the
start commit). The failing ids come from pytest's short summary (``FAILED tests/x.py::t - ...``,
``ERROR ...``), shown by default; for another runner (or pytest with ``-rN``) no id is found and
the exit code alone decides, as before.

A command *cannot start* when its program is not found (exit 126/127, bubblewrap's ``execvp``)
or Python cannot import what it needs before any test runs (``No module named ...`` with no
test counted), or pytest rejects its command line: no write scope can fix that, so it is
reported before any token is spent. Neither can one fix a test file or conftest that pytest
cannot collect when no node writes it (``collection_errors``, judged in run/baseline.py).
"""

from __future__ import annotations

import re
from collections.abc import Collection

__all__ = [
    "PYTEST_TESTS_FAILED",
    "cannot_start",
    "collection_errors",
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
# pytest's own words: its usage error (exit 4), a test file or conftest it cannot import (exit
# 2 when collection is interrupted, 4 for a conftest)
PYTEST_INTERRUPTED, PYTEST_USAGE_ERROR = 2, 4
_USAGE = re.compile(r"^(?:ERROR: usage: |\S+: error: (?:unrecognized arguments|argument ))", re.M)
_COLLECTING = re.compile(r"^_+ ERROR collecting (\S.*?) _+$", re.M)
_CONFTEST = re.compile(r"^ImportError while loading conftest '([^'\n]+)'", re.M)
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
    if exit_code == PYTEST_USAGE_ERROR and _USAGE.search(output):
        return "pytest rejected its command line (a usage error, exit code 4)"
    return None


def collection_errors(exit_code: int | None, output: str) -> list[str]:
    """The files pytest could not import before running any test (``ERROR collecting
    tests/x.py``, ``ImportError while loading conftest '...'``), as it names them; empty when
    it ran tests or stopped for anything else."""
    if exit_code not in (PYTEST_INTERRUPTED, PYTEST_USAGE_ERROR) or _COUNTED.search(output):
        return []
    return list(dict.fromkeys([*_CONFTEST.findall(output), *_COLLECTING.findall(output)]))


def only_known_failures(exit_code: int | None, output: str, known: Collection[str]) -> bool:
    """The run failed only with tests listed in ``known`` (pytest ran and reported each)."""
    if exit_code != PYTEST_TESTS_FAILED or not known:
        return False
    failed = failing_tests(output)
    return bool(failed) and all(test_id in known for test_id in failed)
