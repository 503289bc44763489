"""Nearly-JSON a small model writes, read as the data it means, or None.

Every slip handled here was recorded from a real model (Qwen2.5-Coder-1.5B under llama.cpp,
``make real-model``; the run and call are named where each is handled): doubled braces,
``//`` comments, a Python dict (``None``, trailing commas), closing braces left out, file
contents in Python's triple quotes (closed by three quotes, one quote, an echoed ``</data>``,
or nothing), escaped line breaks for real ones and real ones inside strings, strings joined
with ``+``, a last member with no key. Nothing is ever run:
a Python literal is parsed with ``ast.literal_eval`` under a size cap. text_calls.py decides
which text is a call; this module only reads the text it hands over.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import json
import re
from typing import Any, ClassVar

__all__ = ["NOT_LITERAL", "line_breaks_unescaped", "load_loose", "python_literal"]


# Python's triple-quoted strings inside the JSON, as Qwen2.5-Coder writes file contents:
# ``"content": """def f():\n    ..."""`` (recorded in tests/fixtures/real_model/). A value
# opens at ``: """`` and closes at the ``"""`` that the JSON goes on after: a comma, a closing
# brace or bracket, or (the comma forgotten, recorded) the next key. A docstring inside the
# content keeps its quotes.
_TRIPLE_OPEN = re.compile(r':\s*"""')
_TRIPLE_CLOSE = re.compile(r'"""(?=\s*(?:[,}\]]|"[^"\n]+"\s*:))')
_NEXT_KEY = re.compile(r'\s*"')
_JSON_ESCAPE = re.compile(r'\\(["\\/nrt])')
_ESCAPED = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "r": "\r", "t": "\t"}


def _untriple(text: str) -> str | None:
    """``text`` with each triple-quoted value written as a JSON string; None when there is
    none or one does not close."""
    out: list[str] = []
    pos = 0
    while (opened := _TRIPLE_OPEN.search(text, pos)) is not None:
        closed = _TRIPLE_CLOSE.search(text, opened.end())
        if closed is None:
            before = "".join(out) + text[pos : opened.start()]
            by_one = _closed_by_one_quote(text, opened, before)
            return by_one if by_one is not None else _closed_by_echoed_tag(text, opened, before)
        out += [text[pos : opened.start()], ": ", json.dumps(_triple_body(text, opened, closed))]
        pos = closed.end()
        if _NEXT_KEY.match(text, pos):
            out.append(",")  # '"""' then the next key on its own line: the comma forgotten
    return "".join(out) + text[pos:] if out else None


# A lone double quote the JSON may go on after: a comma, a closing brace or bracket.
_ONE_QUOTE = re.compile(r'(?<!")"(?!")(?=\s*[,}\]])')
_ONE_QUOTE_TRIES = 64  # each a read of the whole text: a reply full of such quotes is no hang


def _closed_by_one_quote(text: str, opened: re.Match[str], before: str) -> str | None:
    """The JSON ``text`` meant when a value opened with triple quotes closes with one (recorded,
    make real-model 2026-12-05 run p, worker call 1: a calc.py opened with ``\"\"\"`` and closed
    with ``",`` before ``"append": false``): the value ends at the first lone quote after which
    the rest of the text is valid JSON, and before any other triple quotes (run d's value
    closes with three and goes on with ``+``: a Python literal); None when there is none. A
    quote of the file's own (``print("a", b)``) is followed by more of the file, not JSON."""
    triple = text.find('"""', opened.end())
    quotes = _ONE_QUOTE.finditer(text, opened.end(), len(text) if triple < 0 else triple)
    for quote in itertools.islice(quotes, _ONE_QUOTE_TRIES):
        value = json.dumps(_triple_body(text, opened, quote))
        candidate = f"{before}: {value}{text[quote.end() :]}"
        with contextlib.suppress(ValueError, RecursionError):
            json.loads(candidate)
            return candidate
    return None


# The closing tag of the data blocks files are shown in (trust.py), echoed by a small model as
# the end of the file it writes, with nothing after it but the ends of the JSON and the fence.
_ECHOED_CLOSE = re.compile(r"<\\?/data>[\s}\]`]*\Z")
_TEXT_END = re.compile(r"\s*\Z")


def _closed_by_echoed_tag(text: str, opened: re.Match[str], before: str) -> str | None:
    """The JSON ``text`` meant when its last triple-quoted value never closes and ends at an
    echoed ``</data>`` instead (recorded, make real-model 2026-12-03 run 9, calls 1, 3 and 5:
    a content opened with triple quotes, then the file, ``</data>`` and the fence): the value
    closed there and the objects opened before it closed after it. None otherwise."""
    echoed = _ECHOED_CLOSE.search(text, opened.end())
    rest = text[opened.end() :]
    if echoed is None and "</data>" not in rest and not rest.rstrip().endswith(("}", "]")):
        # nor closed at all: the file runs to the end of its fenced block (run j of the
        # second 2026-12-04 session, worker call 11: the docstring in the triple quotes,
        # then the rest of calc.py, then the fence; _leading_call reads that block)
        echoed = _TEXT_END.search(text, opened.end())
    if echoed is None:
        return None
    closers = _unclosed(before)
    if closers is None:
        return None
    value = _triple_body(text, opened, echoed)
    return f"{before}: {json.dumps(value)}{closers}"


def _unclosed(prefix: str) -> str | None:
    """The brackets that close what ``prefix`` (JSON cut inside an object) left open, innermost
    first; None when it is not such a prefix."""
    stack: list[str] = []
    in_string = escaped = False
    for char in prefix:
        if escaped:
            escaped = False
        elif in_string:
            escaped = char == "\\"
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and (not stack or stack.pop() != char):
            return None
    if in_string or not stack or stack[-1] != "}":
        return None
    return "".join(reversed(stack))


def _triple_body(text: str, opened: re.Match[str], closed: re.Match[str]) -> str:
    """The content between a value's triple quotes, as the model meant it.

    A backslash and a line break right after the opening quotes is Python's way to start
    without that break. A body with no line break of its own but escaped ones was written
    with JSON's escapes. An odd number of triple quotes inside means the opening quotes of a
    docstring that starts the file were taken as the value's (recorded: the content of
    RECORDED_DOCSTRING_IN_TRIPLE_QUOTES in tests/test_text_calls.py).
    """
    body = line_breaks_unescaped(text[opened.end() : closed.start()].removeprefix("\\\n"))
    if body.count('"""') % 2:
        body = '"""' + body
    return body


def line_breaks_unescaped(text: str) -> str:
    """``text`` with JSON's escapes read, when it was written with escaped line breaks where
    its lines end: more ``\\n`` than real line breaks, and at least two (recorded, make
    real-model 2026-12-03 run 3: a whole test file as one line of ``\\n``, call 6, and a
    calc.py with a real line break for three of its twenty, call 5). One escape on a line of
    code (``print("a\\nb")``) is left as written."""
    escaped = text.count("\\n")
    if escaped < 2 or escaped <= text.count("\n"):
        return text
    return _JSON_ESCAPE.sub(lambda m: _ESCAPED[m.group(1)], text)


def load_loose(text: str) -> Any:
    """The value ``text`` means: JSON as written, or with one of the recorded slips mended;
    None when none fits."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        if text.startswith("{{") and text.endswith("}}"):
            return load_loose(text[1:-1])
        if '"""' in text:
            unquoted = _untriple(text)
            if unquoted is not None and unquoted != text:
                return load_loose(unquoted)
            inner = _inner_triples_escaped(text)
            if inner != text:
                with contextlib.suppress(ValueError, RecursionError):
                    return json.loads(inner)
        return _repaired(text)


def _inner_triples_escaped(text: str) -> str:
    """``text`` with triple quotes inside its JSON strings escaped (recorded, make real-model
    2026-12-04 second session, run j, planner call 1: a requirement copied with the map's
    ``\"\"\"A tiny calculator.\"\"\"`` in it). Never a change to valid JSON: a string that
    closed there would be followed by two more quotes, which JSON never allows."""
    out: list[str] = []
    in_string = escaped = False
    i = 0
    while i < len(text):
        char = text[i]
        if in_string and not escaped and text.startswith('"""', i):
            out.append('\\"\\"\\"')
            i += 3
            continue
        if escaped:
            escaped = False
        elif in_string and char == "\\":
            escaped = True
        elif char == '"':
            in_string = not in_string
        out.append(char)
        i += 1
    return "".join(out)


def _repaired(text: str) -> Any:
    """The value of JSON written with one of the other slips recorded from small models:
    doubled braces, comments, a Python dict, closing braces left out; None if none fits."""
    found = None
    if "{{" in text or "}}" in text:
        # every brace doubled, or only some of them (the opening one and the closing ones)
        undoubled = text.replace("{{", "{").replace("}}", "}")
        if undoubled != text:
            found = load_loose(undoubled)
    if found is None and "//" in text and '"""' not in text:
        # not inside a file's text in triple quotes: its // lines are its own
        uncommented = _without_comments(text)
        if uncommented != text:
            found = load_loose(uncommented)
    if found is None and text.startswith("{") and len(text) <= _MAX_LITERAL:
        # a Python dict, not JSON (recorded, make real-model 2026-12-04 run d, planner
        # call 6: the whole submit_plan with None for null and trailing commas)
        value = python_literal(text)
        found = value if isinstance(value, dict) else None
    if found is None and text.startswith("{"):
        # the last closing braces left out (recorded, make real-model 2026-12-04 second
        # session, run h, planner call 6: a whole submit_plan one brace short); never a
        # value cut inside a string (``_unclosed``)
        closers = _unclosed(text)
        if closers is not None:
            with contextlib.suppress(ValueError, RecursionError):
                found = json.loads(text + closers)
    if found is None and text.startswith("{"):
        found = _without_keyless_member(text)
    if found is None and text.startswith("{") and "\n" in text:
        # real line breaks inside its strings, where JSON wants "\n" (recorded, make
        # real-model 2026-12-05 run ag, calls 44, 46 and 48: test_calc.py's lines)
        with contextlib.suppress(ValueError, RecursionError):
            found = _strings_with_line_breaks(text)
    return found


def _strings_with_line_breaks(text: str) -> Any:
    """The value of ``text`` read with control characters (line breaks, tabs) allowed inside
    its strings, and then with a keyless last member left out; never anything else."""
    with contextlib.suppress(ValueError):
        return json.loads(text, strict=False)
    return _without_keyless_member(text, strict=False)


# A string where an object's last member should be, with no key: ``, "a note"}``.
_KEYLESS_LAST = re.compile(r',\s*"(?:[^"\\\n]|\\.)*"\s*(?=\})')
_KEYLESS_TRIES = 8


def _without_keyless_member(text: str, *, strict: bool = True) -> Any:
    """The value of ``text`` with a string that closes an object but has no key left out
    (recorded, make real-model 2026-12-05 run ag, calls 44, 46 and 48: a write_file's
    arguments ending ``"content": "...", "add 'test_subtract' test case to test_calc.py"}``,
    its description of the change); None when no such string leaves valid JSON. A string
    inside another never matches: its quotes are escaped."""
    for keyless in itertools.islice(_KEYLESS_LAST.finditer(text), _KEYLESS_TRIES):
        with contextlib.suppress(ValueError, RecursionError):
            return json.loads(text[: keyless.start()] + text[keyless.end() :], strict=strict)
    return None


def _without_comments(text: str) -> str:
    """``text`` without ``//`` comments outside its strings, to the end of their lines: JSON
    written as JavaScript (recorded, make real-model 2026-12-03 run 10, planner call 5: a
    submit_plan with ``"base": "main", // set base to an existing commit or branch``). A
    ``//`` inside a string (``"http://..."``) is kept."""
    out: list[str] = []
    for line in text.split("\n"):
        in_string = escaped = False
        cut = len(line)
        for i, char in enumerate(line):
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = in_string
            elif char == '"':
                in_string = not in_string
            elif not in_string and line.startswith("//", i):
                cut = i
                break
        out.append(line[:cut].rstrip() if cut < len(line) else line)
    return "\n".join(out)


NOT_LITERAL = object()
_MAX_LITERAL = 200_000  # characters: a reply read as a Python literal is parsed, never run


def python_literal(source: str) -> Any:
    """The Python literal ``source`` spells (an f-string without fields read as a string;
    strings joined with ``+``, as one), or ``NOT_LITERAL``."""
    if source[:1] in "fF" and source[1:2] in "\"'" and "{" not in source:
        source = source[1:]
    try:
        return ast.literal_eval(_JoinedStrings().visit(ast.parse(source.strip(), mode="eval")))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return NOT_LITERAL


class _JoinedStrings(ast.NodeTransformer):
    """``"a" + "b"`` as ``"ab"``: a file's text written as Python strings joined with ``+``
    (recorded, make real-model 2026-12-04 run d, call 12: a triple-quoted docstring, then
    ``+ "\\n\\n" + "def add(a, b):\\n" + ...``, beside JSON's ``true``); and JSON's
    ``true``, ``false`` and ``null`` as Python's. Only strings are joined; nothing is run."""

    _JSON_WORDS: ClassVar[dict[str, Any]] = {"true": True, "false": False, "null": None}

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self._JSON_WORDS:
            return ast.copy_location(ast.Constant(self._JSON_WORDS[node.id]), node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        left, right = node.left, node.right
        if (
            isinstance(node.op, ast.Add)
            and isinstance(left, ast.Constant)
            and isinstance(right, ast.Constant)
            and isinstance(left.value, str)
            and isinstance(right.value, str)
        ):
            return ast.copy_location(ast.Constant(left.value + right.value), node)
        return node
