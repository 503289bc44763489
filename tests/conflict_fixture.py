"""A semantic conflict between parallel nodes, for the integration-check tests.

``a`` starts using ``lib.util.helper`` while ``b``, unordered with it, renames the helper to
``compute``; ``c`` builds on ``b``'s new name and ``d`` writes an unrelated note. Every node's
own test command passes in its own worktree; the integrated branch fails
``tests/test_calc.py`` (``app.calc`` imports a name that is gone). ``b``'s second attempt keeps
``helper`` as an alias of ``compute``. The plan's ``integration_command`` runs the whole suite.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from . import e2e_fixture as fx

BRANCH = "anti-sprawl/conflict"
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
FILES = {
    "lib/__init__.py": "",
    "lib/util.py": "def helper() -> int:\n    return 2\n",
    "app/__init__.py": "",
    "app/calc.py": "def total() -> int:\n    return 1\n",
    "tests/test_calc.py": "from app.calc import total\n\n\ndef test_total():\n    assert total() == 1\n",
    "tests/test_util.py": "from lib import util\n\n\ndef test_helper():\n    assert util.helper() == 2\n",
    "README.md": "# demo\n",
    "docs/index.md": "# docs\n",
}
CALC = "from lib.util import helper\n\n\ndef total() -> int:\n    return 1 + helper()\n"
CALC_TEST = "from app.calc import total\n\n\ndef test_total():\n    assert total() == 3\n"
UTIL_RENAMED = "def compute() -> int:\n    return 2\n"
UTIL_ALIASED = UTIL_RENAMED + "\n\nhelper = compute  # the old name, kept for callers\n"
UTIL_TEST = "from lib import util\n\n\ndef test_compute():\n    assert util.compute() == 2\n"
EXTRA = "from lib.util import compute\n\n\ndef double() -> int:\n    return 2 * compute()\n"
EXTRA_TEST = "from lib.extra import double\n\n\ndef test_double():\n    assert double() == 4\n"


def _node(task_id: str, writes: list[str], tests: str, **kw: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "name": f"Task {task_id}",
        "goal": f"Change {', '.join(writes)}",
        "read_scope": writes,
        "write_scope": writes,
        "token_budget": 40_000,
        "max_tool_calls": 10,
        "test_command": [*PYTEST, tests] if tests else None,
        **kw,
    }


def plan(**overrides: Any) -> dict[str, Any]:
    """a, b (parallel), c (after b), d (parallel); nodes test only their own files."""
    data: dict[str, Any] = {
        "plan_id": "conflict",
        "requirement": "Use the helper in the calculator, rename it to compute, add double",
        "integration_command": PYTEST,
        "tasks": [
            _node("a", ["app/calc.py", "tests/test_calc.py"], "tests/test_calc.py"),
            _node("b", ["lib/util.py", "tests/test_util.py"], "tests/test_util.py"),
            _node(
                "c",
                ["lib/extra.py", "tests/test_extra.py"],
                "tests/test_extra.py",
                dependencies=["b"],
                read_scope=["lib/util.py"],
            ),
            _node("d", ["docs/notes.md"], "", read_scope=["README.md"], test_command=None),
        ],
    }
    data.update(overrides)
    return data


def _writes(files: dict[str, str], summary: str) -> list[Any]:
    turns: list[Any] = [
        {"tool": "write_file", "args": {"path": p, "content": t}} for p, t in files.items()
    ]
    # No run_tests turn: the final check runs the node's tests anyway (fewer slow runs).
    return [*turns, {"tool": "finish", "args": {"summary": summary}}]


def b_first() -> list[Any]:
    return _writes({"lib/util.py": UTIL_RENAMED, "tests/test_util.py": UTIL_TEST}, "renamed")


def b_fixed() -> list[Any]:
    files = {"lib/util.py": UTIL_ALIASED, "tests/test_util.py": UTIL_TEST}
    return _writes(files, "renamed helper to compute, kept helper as an alias")


def c_turns() -> list[Any]:
    return _writes({"lib/extra.py": EXTRA, "tests/test_extra.py": EXTRA_TEST}, "added double")


def script(b: list[Any] | None = None, c_runs: int = 2) -> dict[str, Any]:
    """b: its turns (default: the breaking rename, then the fix); c runs ``c_runs`` times."""
    return {
        "workers": {
            "a": _writes({"app/calc.py": CALC, "tests/test_calc.py": CALC_TEST}, "uses helper"),
            "b": b if b is not None else [*b_first(), *b_fixed()],
            "c": c_turns() * c_runs,
            "d": _writes({"docs/notes.md": "notes\n"}, "notes"),
        }
    }


def make_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    return fx.make_repo(root, FILES if files is None else files)
