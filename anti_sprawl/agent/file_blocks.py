"""Whole files a model wrote in its reply's prose, read as the writes it meant.

A small local model that cannot call tools often answers a coding task the way a chat model
would: "Here is the complete implementation", a line naming the file, and the whole new file in
a fenced block (recorded from Qwen2.5-Coder-1.5B under llama.cpp, tests/fixtures/real_model/
stalled_run4.json: ``### calc.py`` then a ```python block with add() and subtract(), sent ten
times over while nothing was written). Aider calls this the "whole" edit format and uses it for
exactly such models. The worker (agent/worker.py) turns a reply that has no tool calls but has
such blocks into ``write_file`` calls, marked ``from_text`` like the calls
providers/text_calls.py recovers, and they go through the same firewall and the same caps.

Only what is unambiguous counts: a fence that starts a line, whose label (the line just before
it, less Markdown decoration, or the one code span of that line when it ends with a colon, or
the fence's own info string, or else the block's first line, which is then not part of the
file: a comment naming the path, the path alone with its extension, or read_file's own header
over lines still numbered as read_file numbers them) is exactly a path the node may write.
The first such block per path wins (models restate the file further down, indented, as
"Updated calc.py"), unless a later one defines all it does and more (the model's correction:
"`subtract` should be defined in `calc.py` as well:"); a label that names anything else, or an
empty block, is prose.

A block with no such label is still a file's when it defines every top-level name of exactly
one of the files the node may write (``current``: their texts now), and at least one: the
model restated that file with its change and forgot to name it (recorded, make real-model
2026-12-04 run a, calls 16 and 17: calc.py with add() and subtract(), and test_calc.py with
test_add() and test_subtract(), each after a sentence or in a bare ```python block). Failing
that, it is the file's when that one file alone shares an unindented line of code with it
(run c, calls 6-8: ``from calc import add`` and a new test_subtract(), the test file's import),
and every file the write scope names exists (``current`` maps one still to create to ""); a
write that only adds new definitions is then added after the file's own
(agent/change_tools.py).

A file may also come the way the brief shows one: in our data tag, ``<data kind="file"
source="calc.py" ...>``, its content, and ``</data>``, the source exactly a path the node may
write (recorded: make real-model 2026-12-04 run g, call 21, calc.py and test_calc.py, both
right, under "# Write-scope files"; 2026-12-05 run ag, call 8, calc.py with add() and a new
subtract(); providers/limits.py no longer cuts such a reply there as a tool's answer).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator, Mapping

from ..outline.pyfacts import is_test_module
from ..trust import FILE_TAG
from .change_tools import parses, top_level_names

__all__ = ["has_unlabelled_code", "whole_file_blocks"]

_OPEN = re.compile(r"^```([^`\s]*)\s*$")
_CLOSE = "```"
# Decoration around a file name on its own line: headings, list bullets, bold, code spans,
# a trailing colon, and a leading "File:" (as in "**File: calc.py**").
_DECORATION = re.compile(r"^[#>*\-+\s]*(?:\d+[.)]\s+)?(?:file(?:name)?\s*:\s*)?", re.I)
_MAX_LABEL = 200
# Our data wrapper's opening tag (trust.py), echoed as a block's first line.
_ECHOED_OPENING = re.compile(r'^\s*<?data\s+kind="[^"]*"[^>]*>\s*$')
# A whole file in our data tag (trust.py), as the brief shows one: the source, the content.
# Markdown may come before the tag on its line ("### <data ...>": run ah, calls 4-10).
_DATA_FILE = re.compile(rf"^[ \t#>*+-]*{FILE_TAG}[ \t]*\n(.*?)^[ \t]*</data>[ \t]*$", re.S | re.M)
# A tool's name and a path as a block's first line, as on a command line, the content
# after it in triple quotes (make real-model 2026-12-05 run ai, calls 23-31:
# ``write_file calc.py """`` then the whole file then ``"""``; ``edit_file test_calc.py """``
# then one function, which was written as the whole test file and lost its imports).
_COMMAND_LABEL = re.compile(r"^\s*(\w+_file)\s+(\S+)\s*(?:\"{3}|'{3})?\s*$")
# read_file's header (outline/views.py: "calc.py lines 1-5 of 5"), maybe as a comment, as a
# block's first line, over the file's lines still numbered the way read_file numbers them
# (make real-model 2026-12-05 run an, calls 14-17: "# test_calc.py lines 1-5 of 5", then
# "1<tab>from calc import add" and so on, told four times that the block named no file).
_READ_HEADER = re.compile(r"^\s*(?:#|//)?\s*(\S+)\s+lines\s+\d+-\d+\s+of\s+\d+\b[^\n]*$")
_LINE_NUMBER = re.compile(r"^\d+\t")
# Fenced blocks that hold a call or data, not a file.
_NOT_CODE = ("json", "tool_call")
# A sentence that introduces the block and names one file in a code span, ending with a colon:
# "Here's the corrected `calc.py` file:" (make real-model 2026-12-03 run 4, call 9).
_CODE_SPAN = re.compile(r"`([^`\s]+)`")
# A comment that is only a file name, as the first line inside the block: "# calc.py",
# "// src/app.js", "<!-- index.html -->", "/* style.css */".
_COMMENT_LABEL = re.compile(
    r"^\s*(?:#|//|--|;|/\*|<!--)\s*(?:file(?:name)?\s*:\s*)?([^\s*]+)\s*(?:\*/|-->)?\s*$", re.I
)


def _label(line: str) -> str:
    text = _DECORATION.sub("", line.strip(), count=1)
    text = text.strip().strip("*").strip().rstrip(":").strip().strip("*`'\"").strip()
    return text.removeprefix("./")


def whole_file_blocks(
    text: str, may_write: Callable[[str], bool], current: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """``(path, content)`` for each fenced block ``text`` labels with a writable path, or that
    restates one of the ``current`` files by its definitions, in order, one block per path
    (``_supersedes``); [] when there is none."""
    lines = text.splitlines()
    found: dict[str, str] = {}
    for start, end, info in _blocks(lines):
        path = _path_of(lines, start, info, may_write)
        first = start + 1
        command = _COMMAND_LABEL.match(lines[first]) if path is None and first < end else None
        numbered = False
        if command is not None:
            if command.group(1) != "write_file":
                continue  # "edit_file calc.py" over a part of the file: not the whole file
            path = _writable(command.group(2), may_write)
            first += 1
            if end - 1 > first and lines[end - 1].strip() in ('"""', "'''"):
                end -= 1  # the quotes that close what the label opened
        elif path is None and first < end:
            path, numbered = _first_line_label(lines[first], may_write)
            first += path is not None  # the line names the file; it is not its content
        kept = _unwrapped(lines[first:end])
        body = (
            "\n".join(_LINE_NUMBER.sub("", line, count=1) for line in kept)
            if numbered
            else "\n".join(kept)
        )
        if path is None and current and info.lower() not in _NOT_CODE:
            path = _restated_file(body, current)
        if path is not None and body.strip() and _supersedes(found.get(path), body):
            found[path] = body + "\n"
    for tagged in _DATA_FILE.finditer(text):
        path, body = _writable(html.unescape(tagged.group(1)), may_write), tagged.group(2)
        if path is not None and body.strip() and _supersedes(found.get(path), body):
            found[path] = body
    return list(found.items())


def _supersedes(earlier: str | None, body: str) -> bool:
    """Whether ``body`` is the file's block: the first for its path, or a later one that
    defines every top-level name the earlier one does, and more (make real-model 2026-12-05
    run u, call 16: calc.py with add() alone, then "The `subtract` function should be
    defined in `calc.py` as well:" and the file with both; the first block was written, and
    the next two replies said it was already done)."""
    if earlier is None:
        return True
    return set(top_level_names(earlier)) < set(top_level_names(body))


def _unwrapped(body: list[str]) -> list[str]:
    """A block's lines less our data wrapper (trust.py) when the model echoed it around the
    file: first line the opening tag, its ``<`` sometimes lost, last line ``</data>``
    (make real-model 2026-12-04 run l, call 8: test_calc.py echoed inside ``data kind="file"
    ... >`` and ``</data>``, written as the file with both, which then failed to parse)."""
    filled = [n for n, line in enumerate(body) if line.strip()]
    if not filled or not _ECHOED_OPENING.match(body[filled[0]]):
        return body
    last = filled[-1]
    end = last if body[last].strip() == "</data>" and last != filled[0] else len(body)
    return body[filled[0] + 1 : end]


def _restated_file(body: str, current: Mapping[str, str]) -> str | None:
    """The one file of ``current`` whose top-level names (one or more) ``body`` all defines;
    else the one file that has a top-level line of ``body`` (an import, a definition's line)."""
    defined = set(top_level_names(body))
    matches = [
        path
        for path, text in current.items()
        if defined and (names := set(top_level_names(text))) and names <= defined
    ]
    if not matches and all(current.values()):  # a file still to create may be the one
        lines = _top_level_lines(body)
        matches = [
            path
            for path, text in current.items()
            if lines & _top_level_lines(text) and not _drops_some(text, defined)
        ]
    if not matches and len(current) == 1:
        matches = [path for path, text in current.items() if _only_adds_to(path, text, body)]
    return matches[0] if len(matches) == 1 else None


def _only_adds_to(path: str, text: str, body: str) -> bool:
    """Whether ``body`` is new Python code for the one file the node may write, ``path``
    (``text``, not empty): it parses and defines at least one top-level name, none the file
    has (make real-model 2026-12-05 run ao, calls 5 and 6, write scope calc.py alone: a bare
    ```` ```python ```` block of ``def subtract`` twice, told both times that it named no
    file). Tests only for a test module, and no test for any other: 128 recorded replies would
    otherwise have put a test into calc.py or a copy of calc.py's code into test_calc.py. It is
    added after the file's own definitions (agent/change_tools.py)."""
    defined = set(top_level_names(body))
    if not (path.endswith(".py") and text and defined) or defined & set(top_level_names(text)):
        return False
    tests = {name for name in defined if name.lower().startswith("test")}
    if tests != (defined if is_test_module(path) else set()):
        return False  # tests for a module, or code for a test module: not this file's part
    return parses(body)


def _drops_some(text: str, defined: set[str]) -> bool:
    """Whether a block defining ``defined`` keeps some of ``text``'s definitions and drops
    others: a piece of the file quoted, not the file (make real-model 2026-12-05 run al, call
    7: "Let's make the changes to `calc.py` first." over ``def add`` alone, written as the
    whole calc.py, and the subtract() appended before was lost). One that keeps none only
    adds (agent/change_tools.py adds it after them)."""
    names = set(top_level_names(text))
    return bool(names & defined) and not names <= defined


def _top_level_lines(text: str) -> set[str]:
    """The unindented lines of code: no blank line, comment or lone bracket or quotes."""
    return {
        line.rstrip()
        for line in text.splitlines()
        if line[:1].strip() and not line.startswith(("#", "//")) and len(line.strip()) > 3
    }


def _blocks(lines: list[str]) -> Iterator[tuple[int, int, str]]:
    """``(opening line, closing line, info string)`` of each closed fenced block that starts
    a line, in order; an unclosed fence ends the scan (the reply was cut or is not a file)."""
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if not opened:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == _CLOSE), None)
        if end is None:
            return
        yield i, end, opened.group(1)
        i = end + 1  # past this block's closing fence, which opens nothing


def _path_of(
    lines: list[str], fence: int, info: str, may_write: Callable[[str], bool]
) -> str | None:
    """The writable path that labels the block opening at ``lines[fence]``, if any."""
    candidates = [info.removeprefix("./")] if "." in info or "/" in info else []
    before = next((lines[k] for k in range(fence - 1, -1, -1) if lines[k].strip()), "")
    if before and len(before) <= _MAX_LABEL:
        candidates.append(_label(before))
        spans = _CODE_SPAN.findall(before)
        if before.rstrip().endswith(":") and len(set(spans)) == 1:
            candidates.append(spans[0].removeprefix("./"))
    for candidate in candidates:
        if candidate and " " not in candidate and _safe(candidate) and may_write(candidate):
            return candidate
    return None


def _writable(path: str, may_write: Callable[[str], bool]) -> str | None:
    """``path`` (less a leading ``./``) when it is plain and the node may write it."""
    path = path.removeprefix("./")
    return path if _safe(path) and may_write(path) else None


def _first_line_label(line: str, may_write: Callable[[str], bool]) -> tuple[str | None, bool]:
    """The writable path a block's first line names (read_file's header, or a comment that is
    only the path), and whether the lines after it are numbered as read_file numbers them."""
    header = _READ_HEADER.match(line)
    if header is None:
        return _commented_path(line, may_write) or _bare_path(line, may_write), False
    path = _writable(header.group(1), may_write)
    return path, path is not None


def _bare_path(line: str, may_write: Callable[[str], bool]) -> str | None:
    """A writable path alone on the line, with a file extension (make real-model 2026-12-05,
    run an's test node run again: ```` ``` ```` then ``./test_calc.py`` then the content,
    three times, each told that the block named no file, until the attempt stalled)."""
    word = line.strip()
    return _writable(word, may_write) if "." in word.removeprefix("./") else None


def _commented_path(line: str, may_write: Callable[[str], bool]) -> str | None:
    """The writable path a block's first line names as a comment and nothing else (recorded:
    ```` ``` ```` then ``# calc.py`` then the file, make real-model 2026-12-03 calls 13-16)."""
    named = _COMMENT_LABEL.match(line)
    return None if named is None else _writable(named.group(1), may_write)


def _safe(path: str) -> bool:
    """A plain relative path: the firewall checks it again, this only keeps noise out."""
    return not path.startswith("/") and ".." not in path.split("/") and "\x00" not in path


def has_unlabelled_code(text: str) -> bool:
    """Whether ``text`` has a closed fenced block of code (not JSON) at the start of a line:
    what a model that meant to write a file sends without the line naming it (recorded: a
    whole new calc.py as a bare ```python block, subtract_run8.json). An empty block is none
    (make real-model 2026-12-05 run r: three replies of an empty block only, told each time
    that their code named no file)."""
    lines = text.splitlines()
    return any(
        info.lower() not in _NOT_CODE and any(line.strip() for line in lines[start + 1 : end])
        for start, end, info in _blocks(lines)
    )
