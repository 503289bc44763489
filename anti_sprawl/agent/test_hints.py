"""One line of help under a failed test run: the import a ``NameError`` is missing, or what a
failed equality assertion compared.

A small real model (make real-model, run 6: tests/fixtures/real_model/subtract_run11.json)
appended ``subtract()`` to ``calc.py`` and a test of it to ``test_calc.py``, ran the tests, and
read ``NameError: name 'subtract' is not defined`` without seeing that the test file imports
only ``add``; its next reply redefined ``subtract`` inside the test. The run already knows
where the name is defined, so the observation says it: ``subtract is defined in calc.py;
code in another file that uses it needs `from calc import subtract```.

Only names defined at the top level of a plain ``.py`` entry of the node's scopes are named,
and never the file the error was raised in (where an import cannot be the fix). At most three
names, so a flood of errors stays one short note.

The same model's most frequent failure (make real-model runs 1, 3, g, l and m, and
tests/fixtures/real_model/subtract_run12.json) is a test copied from ``test_add``:
``assert subtract(2, 3) == 5``. pytest says ``assert -1 == 5`` and ``where -1 = subtract(2,
3)``; the model read that over and over and sent the same test again. The hint puts the two
sides in one sentence, without guessing which side is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = ["assertion_hints", "import_hints"]

_NAME_ERROR = re.compile(r"NameError: name '([A-Za-z_]\w*)' is not defined")
# pytest's "path.py:7: NameError" and a traceback's 'File "path.py", line 7' both name where.
_RAISED_IN = re.compile(r'^(\S+\.py):\d+: NameError|File "([^"]+\.py)", line \d+', re.MULTILINE)
_MAX_NAMES = 3
# pytest's report of ``assert f(x) == v``: "E       assert -1 == 5" then
# "E        +  where -1 = subtract(2, 3)"; one line each, the values as pytest printed them.
_COMPARED = re.compile(
    r"^E\s+assert (?P<got>[^\n]{1,80}?) == (?P<want>[^\n]{1,80})\n"
    r"E\s+\+\s+where (?P=got) = (?P<call>[^\n]{1,120})$",
    re.MULTILINE,
)


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


def assertion_hints(output: str) -> list[str]:
    """A hint per failed ``call == value`` assertion ``output`` reports (three at most)."""
    seen = dict.fromkeys(
        (m["call"].strip(), m["got"].strip(), m["want"].strip()) for m in _COMPARED.finditer(output)
    )
    return [
        f"hint: the test expects {call} == {want}, but {call} returned {got}; fix whichever "
        "side is wrong: the code, or the value the test expects"
        for call, got, want in list(seen)[:_MAX_NAMES]
    ]
