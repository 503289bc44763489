"""One line of help under a failed test run: the import a ``NameError`` is missing.

A small real model (make real-model, run 6: tests/fixtures/real_model/subtract_run11.json)
appended ``subtract()`` to ``calc.py`` and a test of it to ``test_calc.py``, ran the tests, and
read ``NameError: name 'subtract' is not defined`` without seeing that the test file imports
only ``add``; its next reply redefined ``subtract`` inside the test. The run already knows
where the name is defined, so the observation says it: ``subtract is defined in calc.py;
code in another file that uses it needs `from calc import subtract```.

Only names defined at the top level of a plain ``.py`` entry of the node's scopes are named,
and never the file the error was raised in (where an import cannot be the fix). At most three
names, so a flood of errors stays one short note.

No such line for a failed ``assert subtract(2, 3) == 5`` (the same model's most frequent
failure: a test copied from ``test_add``). Replayed against the model (make real-model
2026-12-05 run m, request 19, 6 times each, alternated), "the test expects subtract(2, 3) ==
5, but subtract(2, 3) returned -1" under the output made it worse: 0 fixed tests and 5 that
kept ``== 5``, against 3 fixed and 2 kept without it. Restating the wrong value primes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = ["import_hints"]

_NAME_ERROR = re.compile(r"NameError: name '([A-Za-z_]\w*)' is not defined")
# pytest's "path.py:7: NameError" and a traceback's 'File "path.py", line 7' both name where.
_RAISED_IN = re.compile(r'^(\S+\.py):\d+: NameError|File "([^"]+\.py)", line \d+', re.MULTILINE)
_MAX_NAMES = 3


def _module(path: str) -> str:
    dotted = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    return dotted.removeprefix("src.")


def _defines(text: str, name: str) -> bool:
    pattern = rf"^(?:async\s+def|def|class)\s+{name}\b|^{name}\s*(?::[^=\n]*)?="
    return re.search(pattern, text, re.MULTILINE) is not None


def import_hints(
    output: str, files: Iterable[str], text_of: Callable[[str], str | None]
) -> list[str]:
    """A hint per name ``output`` reports undefined that one of ``files`` defines."""
    names = list(dict.fromkeys(_NAME_ERROR.findall(output)))[:_MAX_NAMES]
    if not names:
        return []
    raised = {p for match in _RAISED_IN.findall(output) for p in match if p}
    candidates = [f for f in files if f.endswith(".py") and not any(c in f for c in "*?[")]
    texts = {f: text_of(f) for f in candidates}
    hints: list[str] = []
    for name in names:
        for path, text in texts.items():
            if text is None or any(r == path or r.endswith("/" + path) for r in raised):
                continue
            if _defines(text, name):
                hints.append(
                    f"hint: {name} is defined in {path}; code in another file that uses it "
                    f"needs `from {_module(path)} import {name}`"
                )
                break
    return hints
