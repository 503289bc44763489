"""The top-level definitions a patch adds or changes, read from its ``+`` lines.

A downstream node is told what its dependencies did. Their summaries are the models' own
claims (run/result.py sets them against the diff); the names a dependency's change defines are
facts, and a small model needs them spelled out: the test node of make real-model 2026-12-05
run an had ``calc.py`` with its new ``subtract()`` in view and still wrote its own copy of
``subtract()`` into ``test_calc.py``, as in runs ak and am. The names come from the patch the
reducer already keeps (``TaskResult.diff``), so no file is read and no git runs; only Python
definitions at the top level of a file, with their parameters when they fit on the line.
"""

from __future__ import annotations

import re

__all__ = ["MAX_DEFINITIONS", "patch_definitions"]

MAX_DEFINITIONS = 20
_TARGET = re.compile(r"^\+\+\+ b/(.+)$")  # a quoted path (unusual bytes) is skipped
_DEFINITION = re.compile(
    r"^\+(?:async\s+def|def)\s+(\w+)\s*(\([^()\n]*\))?|^\+class\s+(\w+)", re.ASCII
)
_PYTHON = (".py", ".pyi")


def patch_definitions(patch: str) -> list[str]:
    """``"path: name(params)"`` (``"path: class Name"``) for each top-level ``def`` or
    ``class`` line the unified diff ``patch`` adds, in order, at most ``MAX_DEFINITIONS``
    (then one ``"... and N more"``). A signature over several lines shows as ``name(...)``."""
    found: list[str] = []
    path: str | None = None
    for line in patch.splitlines():
        if line.startswith("+++ "):
            target = _TARGET.match(line)
            path = target.group(1) if target and target.group(1).endswith(_PYTHON) else None
            continue
        if path is None or not line.startswith("+"):
            continue
        defined = _DEFINITION.match(line)
        if defined is None:
            continue
        function, params, cls = defined.groups()
        found.append(f"{path}: class {cls}" if cls else f"{path}: {function}{params or '(...)'}")
    if len(found) > MAX_DEFINITIONS:
        rest = len(found) - MAX_DEFINITIONS
        found = [*found[:MAX_DEFINITIONS], f"... and {rest} more"]
    return found
