"""The import a NameError misses, named under a failed test run (agent/test_hints.py)."""

from __future__ import annotations

from anti_sprawl.agent.test_hints import import_hints

PYTEST_TAIL = """\
    def test_subtract():
>       assert subtract(2, 3) == 5
E       NameError: name 'subtract' is not defined

test_calc.py:7: NameError
FAILED test_calc.py::test_subtract - NameError: name 'subtract' is not defined
"""
FILES = {
    "calc.py": "def add(a, b):\n    return a + b\ndef subtract(a, b): return a - b",
    "test_calc.py": "from calc import add\n\ndef test_subtract():\n    assert subtract(2, 3)\n",
    "src/pkg/__init__.py": "VERSION: str = '1'\n",
}


def hints(output: str, files: list[str]) -> list[str]:
    return import_hints(output, files, FILES.get)


def test_the_missing_import_is_named() -> None:
    assert hints(PYTEST_TAIL, ["calc.py", "test_calc.py"]) == [
        "hint: subtract is defined in calc.py; code in another file that uses it needs "
        "`from calc import subtract`"
    ]


def test_a_package_module_and_an_annotated_name() -> None:
    output = "NameError: name 'VERSION' is not defined\n"
    assert hints(output, ["src/pkg/__init__.py"]) == [
        "hint: VERSION is defined in src/pkg/__init__.py; code in another file that uses it "
        "needs `from pkg import VERSION`"
    ]


def test_no_hint_for_the_file_that_raised_or_a_name_defined_nowhere() -> None:
    raised_in_calc = PYTEST_TAIL.replace("test_calc.py:7", "calc.py:3")
    assert hints(raised_in_calc, ["calc.py"]) == []
    assert hints(PYTEST_TAIL.replace("subtract", "multiply"), ["calc.py"]) == []
    assert hints("1 failed: AssertionError", ["calc.py"]) == []


def test_globs_unreadable_files_and_other_languages_are_skipped() -> None:
    assert hints(PYTEST_TAIL, ["*.py", "missing.py", "calc.js"]) == []
