"""Whole files in a prose reply (agent/file_blocks.py): which blocks count as writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from anti_sprawl.agent.file_blocks import has_unlabelled_code, whole_file_blocks
from anti_sprawl.fs.scopes import Scope

WRITABLE = Scope(["calc.py", "tests/**"]).matches


@pytest.mark.parametrize(
    "label",
    [
        "### calc.py",
        "calc.py",
        "**calc.py**",
        "`calc.py`:",
        "File: calc.py",
        "**File: `calc.py`**",
        "1. calc.py",
        "- ./calc.py",
    ],
)
def test_a_line_naming_a_writable_file_labels_the_block_after_it(label: str) -> None:
    text = f"Here it is:\n\n{label}\n```python\ndef f():\n    return 1\n```\nDone."
    assert whole_file_blocks(text, WRITABLE) == [("calc.py", "def f():\n    return 1\n")]


def test_the_info_string_may_name_the_file() -> None:
    text = "```tests/test_calc.py\nassert True\n```"
    assert whole_file_blocks(text, WRITABLE) == [("tests/test_calc.py", "assert True\n")]


@pytest.mark.parametrize(
    "text",
    [
        "### other.py\n```python\nx = 1\n```",  # not in the write scope
        "Here is calc.py with a change:\n```python\nx = 1\n```",  # a sentence, not a label
        "### ../calc.py\n```python\nx = 1\n```",
        "### /etc/calc.py\n```python\nx = 1\n```",
        "### calc.py\n```python\nx = 1\n",  # never closed: a cut reply
        "- calc.py\n    ```python\n    x = 1\n    ```",  # an indented fence: an illustration
        "no code at all",
    ],
)
def test_anything_less_plain_stays_prose(text: str) -> None:
    assert whole_file_blocks(text, WRITABLE) == []


# make real-model 2026-12-03, call 14 verbatim: no label line, each block's first line names
# the file as a comment
RECORDED_COMMENT_LABELS = (
    '```\n# calc.py\n"""A tiny calculator."""\n\n\ndef subtract(a, b):\n    return a - b\n```\n\n'
    "```\n# test_calc.py\nfrom calc import subtract\n\n\ndef test_subtract():\n"
    "    assert subtract(2, 3) == -1\n```"
)


def test_a_first_line_comment_naming_a_writable_file_labels_its_block() -> None:
    writable = Scope(["calc.py", "test_calc.py"]).matches
    assert whole_file_blocks(RECORDED_COMMENT_LABELS, writable) == [
        ("calc.py", '"""A tiny calculator."""\n\n\ndef subtract(a, b):\n    return a - b\n'),
        (
            "test_calc.py",
            "from calc import subtract\n\n\ndef test_subtract():\n"
            "    assert subtract(2, 3) == -1\n",
        ),
    ]
    for block in ("```js\n// tests/app.js\nf()\n```", "```html\n<!-- tests/a.html -->\n<p>\n```"):
        ((path, content),) = whole_file_blocks(block, WRITABLE)
        assert path.startswith("tests/")
        assert "tests/" not in content


# make real-model 2026-12-03 run 4, call 9 verbatim: each block introduced by a sentence that
# names its file in a code span and ends with a colon
RECORDED_SENTENCE_LABELS = '<tools></tools>\n\nThe failure in your previous attempt was due to the fact that the code block containing the docstring was not properly formatted. The docstring should be on a separate line from the function definition.\n\nHere\'s the corrected `calc.py` file:\n\n```python\n"""A tiny calculator."""\nfrom typing import *\nfrom collections import *\n\ndef add(a, b):\n    return a + b\n```\n\nAnd here\'s the updated `test_calc.py` file:\n\n```python\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n```\n\nNow, you should be able to run the tests with `run_tests` without any issues.'


def test_a_sentence_naming_one_writable_file_and_ending_with_a_colon_labels_its_block() -> None:
    writable = Scope(["calc.py", "test_calc.py"]).matches
    blocks = whole_file_blocks(RECORDED_SENTENCE_LABELS, writable)
    assert [path for path, _ in blocks] == ["calc.py", "test_calc.py"]
    assert blocks[0][1].startswith('"""A tiny calculator."""\n')
    assert blocks[1][1] == "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    for prose in (
        "Here's the updated `calc.py` and `test_calc.py`:\n```python\nx = 1\n```",  # two files
        "Here's what `calc.py` does\n```python\nx = 1\n```",  # no colon: not an introduction
        "Here's `other.py`:\n```python\nx = 1\n```",  # not writable
    ):
        assert whole_file_blocks(prose, writable) == []


@pytest.mark.parametrize(
    "text",
    [
        "```python\n# other.py\nx = 1\n```",  # not in the write scope
        "```python\n# calc.py is the calculator\nx = 1\n```",  # a sentence, not a name
        "```python\n# ../calc.py\nx = 1\n```",
        "```python\nx = 1\n# calc.py\n```",  # not the first line
    ],
)
def test_a_comment_that_is_not_only_a_writable_name_labels_nothing(text: str) -> None:
    assert whole_file_blocks(text, WRITABLE) == []


def test_the_first_block_per_file_wins_and_order_is_kept() -> None:
    text = (
        "### tests/test_calc.py\n```python\nfirst test\n```\n"
        "### calc.py\n```python\nfirst calc\n```\n"
        "Updated version:\n\n### calc.py\n```python\nsecond calc\n```\n"
    )
    assert whole_file_blocks(text, WRITABLE) == [
        ("tests/test_calc.py", "first test\n"),
        ("calc.py", "first calc\n"),
    ]


def test_a_later_block_that_defines_more_of_the_file_is_the_file() -> None:
    """make real-model 2026-12-05 run u, call 16: calc.py with add() alone, then "The
    `subtract` function should be defined in `calc.py` as well:" and the file with both, then
    the same again. The first block was written (no subtract), and the next two replies were
    told it was already done. A later block that defines all the earlier one does, and more,
    is the model's correction; one that defines less, or the same, is a restatement."""
    reply = Path(__file__).parent / "fixtures/real_model/file_blocks_correction_run_u.txt"
    calc = '"""A tiny calculator."""\n\ndef add(a, b):\n    return a + b\n'
    current = {"calc.py": calc, "test_calc.py": "from calc import add\n"}
    ((path, body),) = whole_file_blocks(reply.read_text(), current.__contains__, current)
    assert path == "calc.py"
    assert body.endswith(
        "def add(a, b):\n    return a + b\n\ndef subtract(a, b):\n    return a - b\n"
    )
    less = "### calc.py\n```python\ndef a():\n    pass\ndef b():\n    pass\n```\n"
    less += "### calc.py\n```python\ndef a():\n    pass\n```\n"
    assert whole_file_blocks(less, WRITABLE) == [
        ("calc.py", "def a():\n    pass\ndef b():\n    pass\n")
    ]


def test_an_empty_block_is_not_an_empty_file() -> None:
    assert whole_file_blocks("calc.py\n```\n\n```", WRITABLE) == []


def test_only_code_outside_json_calls_is_unlabelled_code() -> None:
    two_calls = '```json\n{"name": "finish"}\n```\n```json\n{"name": "finish"}\n```'
    assert not has_unlabelled_code(two_calls)  # the closing fence opens nothing
    assert has_unlabelled_code("Here:\n```python\ndef subtract(a, b):\n    return a - b\n```")
    assert not has_unlabelled_code("```python\nnever closed")


# make real-model 2026-12-04 run a, call 17 verbatim: both files restated with the change, each
# in a bare ```python block, and a block of finish's arguments as data
RECORDED_UNLABELLED_RESTATEMENTS = 'To complete the task, you need to add the `subtract` function and its test in `calc.py` and `test_calc.py`.\n\n```python\n# A tiny calculator.\n\ndef add(a, b):\n    return a + b\n\n# Add the subtract function\ndef subtract(a, b):\n    return a - b\n```\n\n```python\nfrom calc import add, subtract\n\ndef test_add():\n    assert add(2, 3) == 5\n\ndef test_subtract():\n    assert subtract(5, 2) == 3\n```\n\nAfter adding these changes, review the `calc.py` and `test_calc.py` files to ensure there are no syntax errors or issues. If everything is correct, call the `run_tests` function to ensure all tests pass.\n\n### Conclusion\nThe changes are complete. The `subtract` function and its test are now implemented, and the `run_tests` function has been called to ensure all tests pass.\n\n### Output\nWhen you call the `finish` function with the summary, notes, interfaces, and files, you can include the following:\n\n```json\n{\n    "summary": "Added the subtract function and its test in calc.py and test_calc.py. The tests passed.",\n    "notes": "",\n    "interfaces": "The task requires running the `run_tests` command, which will update the test results in the orchestrator\'s worktree.",\n    "files": [\n        "calc.py",\n        "test_calc.py"\n    ]\n}\n```\n\nThis completes the task as per the instructions.'
CURRENT = {
    "calc.py": '"""A tiny calculator."""\n\n\ndef add(a, b):\n    return a + b\n',
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


def test_an_unlabelled_block_that_defines_all_of_one_files_names_is_that_file() -> None:
    """Each block defines every top-level name of exactly one writable file (and more): it is
    that file restated with its change. The JSON block is data."""
    writable = Scope(list(CURRENT)).matches
    blocks = whole_file_blocks(RECORDED_UNLABELLED_RESTATEMENTS, writable, CURRENT)
    assert [path for path, _ in blocks] == ["calc.py", "test_calc.py"]
    assert blocks[0][1].endswith("def subtract(a, b):\n    return a - b\n")
    assert "def test_subtract():" in blocks[1][1]
    # without the files' texts, the same blocks name no file
    assert whole_file_blocks(RECORDED_UNLABELLED_RESTATEMENTS, writable) == []


@pytest.mark.parametrize(
    "block",
    [
        "def subtract(a, b):\n    return a - b\n",  # only a new name: which file is not said
        "def add(a, b):\n    return a\n\ndef test_add():\n    pass\n",  # both files' names
        "add(2, 3)\n",  # no definition
    ],
)
def test_a_block_that_restates_no_one_file_is_prose(block: str) -> None:
    writable = Scope(list(CURRENT)).matches
    assert whole_file_blocks(f"Here:\n\n```python\n{block}```\n", writable, CURRENT) == []
    labelled = f"calc.py\n```python\n{block}```\n"
    assert whole_file_blocks(labelled, writable, CURRENT) == [("calc.py", block)]


# make real-model 2026-12-04 run c, call 6 verbatim: a new test under the test file's import,
# in a bare python block
RECORDED_NEW_TEST_UNDER_ITS_IMPORT = (
    "To change a file without a tool call, write its path on a line of its own, then its complete "
    "new content in a fenced code block: it is written for you.\n\n```python\nfrom calc import "
    "add\n\n\ndef test_subtract():\n    assert subtract(2, 3) == -1\n```\n\nThe whole test "
    "command passes with your changes: if the goal is met, call finish."
)


def test_an_unlabelled_block_that_shares_a_line_with_one_file_alone_is_that_file() -> None:
    """The block brings a new name only, but its import line is test_calc.py's alone. Not when
    another file shares the line too, nor when a file the write scope names does not exist
    yet (the block may be that one's)."""
    writable = Scope([*CURRENT, "new.py"]).matches
    blocks = whole_file_blocks(RECORDED_NEW_TEST_UNDER_ITS_IMPORT, writable, CURRENT)
    assert blocks == [("test_calc.py", "from calc import add\n\n\ndef test_subtract():\n"
                       "    assert subtract(2, 3) == -1\n")]  # fmt: skip
    both = {**CURRENT, "calc.py": "from calc import add\n"}
    assert whole_file_blocks(RECORDED_NEW_TEST_UNDER_ITS_IMPORT, writable, both) == []
    to_create = {**CURRENT, "new.py": ""}
    assert whole_file_blocks(RECORDED_NEW_TEST_UNDER_ITS_IMPORT, writable, to_create) == []


# make real-model 2026-12-04 run l, call 8: test_calc.py as we showed it, our data wrapper
# echoed around it with the opening tag's "<" lost
RECORDED_ECHOED_WRAPPER = (
    '```\ndata kind="file" source="test_calc.py" trust="untrusted">\nfrom calc import add\n\n\n'
    "def test_add():\n    assert add(2, 3) == 5\n</data>\n```"
)


@pytest.mark.parametrize("opening", ["", "<"])
def test_our_data_wrapper_echoed_around_a_file_is_not_part_of_it(opening: str) -> None:
    """It was written as test_calc.py, tags and all, and the tests stopped at collection."""
    text = RECORDED_ECHOED_WRAPPER.replace("\ndata kind", f"\n{opening}data kind")
    blocks = whole_file_blocks(text, Scope(list(CURRENT)).matches, CURRENT)
    assert blocks == [("test_calc.py", "from calc import add\n\n\ndef test_add():\n"
                       "    assert add(2, 3) == 5\n")]  # fmt: skip


def test_a_closing_data_tag_alone_stays_in_the_file() -> None:
    """An XML file may end in ``</data>``: without our opening tag first, it is the file's."""
    text = "data.xml\n```\n<root>\n<data>1\n</data>\n```"
    assert whole_file_blocks(text, Scope(["data.xml"]).matches) == [
        ("data.xml", "<root>\n<data>1\n</data>\n")
    ]


def test_an_empty_block_is_no_unlabelled_code() -> None:
    assert not has_unlabelled_code("```\n```")
    assert not has_unlabelled_code("```python\n\n```")
    assert has_unlabelled_code("```python\nx = 1\n```")


def test_a_block_labelled_like_a_command_line_is_a_write_only_for_write_file() -> None:
    """make real-model 2026-12-05 run ai, calls 23 and 24: ``write_file calc.py`` and triple
    quotes as a block's first line, the whole file, then the closing quotes: the file, without
    the label and the quotes. ``edit_file test_calc.py`` over one test function was written as
    the whole test file and lost its imports: a block under any other tool's name is not a
    file, even when its definitions would restate one."""
    calc = "import math\n\n\ndef add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n"
    calc += "    return a - b\n"
    written = f'```\nwrite_file calc.py """\n{calc}"""\n```'
    assert whole_file_blocks(written, WRITABLE) == [("calc.py", calc)]
    test = "def test_add():\n    assert add(2, 3) == 5\n    assert subtract(5, 2) == 3\n"
    edited = f'```\nedit_file tests/test_calc.py """\n{test}"""\n```\n```'
    current = {"calc.py": calc, "tests/test_calc.py": "def test_add():\n    pass\n"}
    assert whole_file_blocks(edited, WRITABLE, current) == []


def test_an_unlabelled_piece_of_a_file_is_not_the_file() -> None:
    """make real-model 2026-12-05 run al, call 7 (calc.py already holding add() and the
    subtract() the model had appended): "Let's make the changes to `calc.py` first." over a
    block of ``def add`` alone, then one of ``def subtract`` alone. The first shares a line
    with calc.py and was written as the whole file: subtract() was lost. A block that keeps
    some of a file's definitions and drops others is a piece quoted, not the file; one that
    keeps none still only adds to it."""
    add = "def add(a, b):\n    return a + b\n"
    sub = "def subtract(a, b):\n    return a - b\n"
    reply = (
        "Let's make the changes to `calc.py` first.\n\n"
        f"```python\n{add}```\n\nThis change does not affect the test file.\n\n"
        f"```python\n{sub}```\n\nNow, the `subtract` function is added to `calc.py`."
    )
    current = {"calc.py": f'"""A tiny calculator."""\n\n\n{add}\n\n{sub}'}
    assert whole_file_blocks(reply, WRITABLE, current) == []
    shared = '"""A tiny calculator."""\n\n\ndef mul(a, b):\n    return a * b\n'
    only_new = {"calc.py": f'"""A tiny calculator."""\n\n\n{add}'}
    assert whole_file_blocks(f"```python\n{shared}```", WRITABLE, only_new) == [("calc.py", shared)]


# make real-model 2026-12-05 run an, calls 14 and 16 verbatim: read_file's header and numbered
# lines, as read_file had shown test_calc.py, sent as the file (told each time that the block
# named no file, four times, until the attempt stalled).
RUN_AN_14 = (
    "To change the file, I will write the whole new content in a fenced code block.\n\n"
    "```python\n# test_calc.py lines 1-5 of 5\n1\tfrom calc import add\n2\t\n3\tdef test_add():\n"
    "4\t    assert add(2, 3) == 5\n```"
)
RUN_AN_16 = (
    "To change the file, I will write the whole new content in a fenced code block.\n\n"
    "```python\n# test_calc.py lines 1-7 of 7\n1\tfrom calc import add\n2\t\n3\t\n4\tdef "
    "test_add():\n5\t    assert add(2, 3) == 5\n6\tdef subtract(a, b):\n7\t    return a - b\n8\tdef "
    "subtract(a, b):\n9\t    return a - b\n```"
)


def test_read_file_s_header_and_numbered_lines_echoed_are_the_file_without_the_numbers() -> None:
    may_write = Scope(["test_calc.py"]).matches
    assert whole_file_blocks(RUN_AN_14, may_write) == [
        ("test_calc.py", "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    ]
    ((path, text),) = whole_file_blocks(RUN_AN_16, may_write)
    assert path == "test_calc.py"
    assert text.startswith("from calc import add\n\n\ndef test_add():\n")
    assert text.endswith("def subtract(a, b):\n    return a - b\n")
    # the header of a file the node may not write labels nothing (run an, call 15: calc.py)
    assert whole_file_blocks(RUN_AN_14.replace("test_calc.py", "calc.py"), may_write) == []
    # numbers are taken off only under the header: a data file's own first column stays
    tsv = "1\tone\n2\ttwo\n"
    assert whole_file_blocks(f"tests/ranks.tsv\n```\n{tsv}```", WRITABLE) == [
        ("tests/ranks.tsv", tsv)
    ]


@pytest.mark.parametrize(
    "reply",
    [
        # make real-model 2026-12-05 run am, call 34, verbatim
        "```\ntest_calc.py\ndef subtract(a, b):\n    return a - b\n\ndef test_subtract():\n"
        "    assert subtract(2, 3) == 5\n```",
        # run an's test node run again (exp17), three replies in a row, verbatim
        "```\n./test_calc.py\ndef subtract(a, b):\n    return a - b\n```",
    ],
)
def test_a_writable_path_alone_on_a_block_s_first_line_labels_it(reply: str) -> None:
    ((path, text),) = whole_file_blocks(reply, Scope(["test_calc.py"]).matches)
    assert path == "test_calc.py"
    assert text.startswith("def subtract(a, b):\n")
    # a word without a file's extension is code, not a label
    assert whole_file_blocks("```\nMakefile\nall:\n\ttrue\n```", Scope(["Makefile"]).matches) == []


# make real-model 2026-12-05 run o, call 19, verbatim: the function and its test, each in a bare
# block; run ao's calls 5 and 6 were its first block alone
RUN_O_19 = (
    "```python\ndef subtract(a, b):\n    return a - b\n```\n\n"
    "```python\ndef test_subtract():\n    assert subtract(5, 2) == 3\n```"
)


def test_new_code_in_a_bare_block_is_for_the_one_file_the_node_may_write() -> None:
    """Run ao's node could write calc.py alone and was told twice that ``def subtract`` in a
    bare block named no file. With one file to write, new code of its kind is that file's
    (added after its definitions on write): tests for a test module, no test for another."""
    calc = '"""A tiny calculator."""\n\n\ndef add(a, b):\n    return a + b\n'
    test = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    sub = "def subtract(a, b):\n    return a - b\n"
    assert whole_file_blocks(RUN_O_19, Scope(["calc.py"]).matches, {"calc.py": calc}) == [
        ("calc.py", sub)
    ]
    only_test = whole_file_blocks(RUN_O_19, Scope(["test_calc.py"]).matches, {"test_calc.py": test})
    assert only_test == [("test_calc.py", "def test_subtract():\n    assert subtract(5, 2) == 3\n")]
    # two files to write: whose part it is stays unsaid, as before
    both = {"calc.py": calc, "test_calc.py": test}
    assert whole_file_blocks(RUN_O_19, Scope(["calc.py", "test_calc.py"]).matches, both) == []
    # prose in a block is no code
    prose = "```python\nAdd subtract to calc.py\n```"
    assert whole_file_blocks(prose, Scope(["calc.py"]).matches, {"calc.py": calc}) == []
