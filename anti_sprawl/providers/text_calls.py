"""Tool calls a model wrote as text, turned into tool calls, or named as what went wrong.

Small local models behind an OpenAI-compatible server often never emit the server's tool-call
tags, so the server hands their call back as the message's ``content`` (issue 23: every call of
Qwen2.5-Coder 0.5B and 1.5B under llama.cpp). The shapes seen: a bare JSON object, a fenced
```json block, ``<tool_call>`` tags, doubled braces ``{{...}}``, and several such objects one
per line (the planner's reads and its ``submit_plan`` in one reply, with the opening brace
doubled and every closing one: ``{{"name": ..., "arguments": {...}}}}``, recorded in
tests/fixtures/real_model/planner_run3.json), one whole call followed by commentary, or
a call's arguments as Python assignments to one dictionary's keys (``obj['summary'] = ...``).
Content that is *only* such objects (or only such tagged blocks) and names a known tool, or
whose object matches exactly one tool's required arguments, or that opens with one whole call
of a known tool, becomes tool calls marked ``from_text`` (the manifest and the transcript say
so). A fenced block closes at its first fence line unless it holds an object that is whole only
at a later one: a file's text inside the call may hold fences of its own (make real-model
2026-12-05 run p, worker call 1: a calc.py written with ```python blocks in it, cut at the
first inner fence). Anything else that looks like a call is left as text, with
``text_call_problem`` saying what was wrong, for the nudge the model is sent next.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import json
import re
import uuid
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

from .base import ToolCall, ToolSpec

__all__ = [
    "fenced_objects",
    "is_blank",
    "recover_text_calls",
    "text_call_nudge",
    "text_call_problem",
]

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.S)
# A fenced block's opening line and the lines that may close it: at the start of a line,
# anywhere in a longer reply; or indented, as under a numbered list item.
_BLOCK = (re.compile(r"^```[a-zA-Z]*[ \t]*\n", re.M), re.compile(r"\n```[ \t]*$", re.M))
_INDENTED = (
    re.compile(r"^[ \t]*```[a-zA-Z_]*[ \t]*\n", re.M),
    re.compile(r"\n[ \t]*```[ \t]*$", re.M),
)
# Any fence that starts a line, whatever follows it on the line.
_ANY_FENCE = re.compile(r"\n```")
# Fences tried as the close of a block that holds a cut object: a file in a call holds a few.
_FENCES_TRIED = 32
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "parameters", "args", "input")
# Text that a model meant as a call: a JSON object, a fenced block, or the tags.
_LOOKS_LIKE_CALL = re.compile(r"^\s*(\{|```|<tool_call>)|\"(name|arguments)\"\s*:", re.S)


def _objects(text: str) -> list[str] | None:
    """The JSON texts ``text`` consists of, or None when it is something else too."""
    body = text.strip()
    fenced_blocks = _blocks(body)
    if len(fenced_blocks) > 1 and not _between(body, fenced_blocks).strip():
        # one fenced call each
        return [_undouble_outer(block.body.strip()) for block in fenced_blocks]
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    elif body.startswith("{") and body.endswith("```"):
        body = body[:-3].strip()  # a closing fence without its opening one (recorded)
    if body.startswith("<tool_call>"):
        blocks = _TAGGED.findall(body)
        rest = _TAGGED.sub("", body).strip()
        return blocks if blocks and not rest else None
    if not body.startswith("{"):
        return None
    if _load(body) is None:  # not one object written over several lines
        calls = _one_per_line(body)
        if len(calls) > 1:
            return [_undouble_outer(call) for call in calls]
    return [_undouble_outer(body)]


class _Block(NamedTuple):
    """A fenced block of a reply: what it holds, and where it starts and ends."""

    body: str
    start: int
    end: int


def _blocks(text: str, fences: tuple[re.Pattern[str], re.Pattern[str]] = _BLOCK) -> list[_Block]:
    """The closed fenced blocks of ``text``, in order (``fences``: their opening line and the
    lines that may close them)."""
    opening, closing = fences
    found: list[_Block] = []
    pos = 0
    while (opened := opening.search(text, pos)) is not None:
        closed = _closing_fence(text, opened.end(), closing)
        if closed is None:
            break
        body = text[opened.end() : closed.start()]
        found.append(_Block(body, opened.start(), closed.end()))
        pos = closed.end()
    return found


def _closing_fence(text: str, start: int, closing: re.Pattern[str]) -> re.Match[str] | None:
    """The fence that closes the block whose text starts at ``start``: its first fence, unless
    the text up to it is an object cut short (it does not end with a brace, or does not load)
    and the text up to a later fence is a whole one. The file a call writes may hold fences of
    its own (run p); a block after a whole object is never swallowed."""
    fences = closing.finditer(text, start)
    first = next(fences, None)
    if first is None or not text[start : first.start()].lstrip().startswith("{"):
        return first
    for fence in itertools.chain([first], itertools.islice(fences, _FENCES_TRIED)):
        body = text[start : fence.start()].strip()
        if body.endswith("}") and isinstance(_load(body), dict):
            return fence
    return first


def _between(text: str, blocks: Sequence[_Block]) -> str:
    """The text of ``text`` outside its ``blocks``."""
    edges = [0, *(edge for block in blocks for edge in (block.start, block.end)), len(text)]
    return "".join(text[a:b] for a, b in zip(edges[::2], edges[1::2], strict=True))


def _one_per_line(body: str) -> list[str]:
    """Several objects, each opening at the start of a line; a call may go on over indented
    lines (recorded: three reads on a line each, then a ``submit_plan`` over 25 lines,
    tests/fixtures/real_model/planner_run5.json)."""
    calls: list[list[str]] = []
    for line in body.splitlines():
        if not line.strip():
            continue
        if line.startswith("{") or not calls:
            calls.append([line])
        else:
            calls[-1].append(line)
    return ["\n".join(lines).strip() for lines in calls]


def _undouble_outer(body: str) -> str:
    """``{{...}}`` less its outer pair: doubled braces, as some chat templates escape them."""
    return body[1:-1] if body.startswith("{{") and body.endswith("}}") else body


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
    body = _line_breaks_unescaped(text[opened.end() : closed.start()].removeprefix("\\\n"))
    if body.count('"""') % 2:
        body = '"""' + body
    return body


def _line_breaks_unescaped(text: str) -> str:
    """``text`` with JSON's escapes read, when it was written with escaped line breaks where
    its lines end: more ``\\n`` than real line breaks, and at least two (recorded, make
    real-model 2026-12-03 run 3: a whole test file as one line of ``\\n``, call 6, and a
    calc.py with a real line break for three of its twenty, call 5). One escape on a line of
    code (``print("a\\nb")``) is left as written."""
    escaped = text.count("\\n")
    if escaped < 2 or escaped <= text.count("\n"):
        return text
    return _JSON_ESCAPE.sub(lambda m: _ESCAPED[m.group(1)], text)


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        if text.startswith("{{") and text.endswith("}}"):
            return _load(text[1:-1])
        if '"""' in text:
            unquoted = _untriple(text)
            if unquoted is not None and unquoted != text:
                return _load(unquoted)
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
            found = _load(undoubled)
    if found is None and "//" in text and '"""' not in text:
        # not inside a file's text in triple quotes: its // lines are its own
        uncommented = _without_comments(text)
        if uncommented != text:
            found = _load(uncommented)
    if found is None and text.startswith("{") and len(text) <= _MAX_LITERAL:
        # a Python dict, not JSON (recorded, make real-model 2026-12-04 run d, planner
        # call 6: the whole submit_plan with None for null and trailing commas)
        value = _literal(text)
        found = value if isinstance(value, dict) else None
    if found is None and text.startswith("{"):
        # the last closing braces left out (recorded, make real-model 2026-12-04 second
        # session, run h, planner call 6: a whole submit_plan one brace short); never a
        # value cut inside a string (``_unclosed``)
        closers = _unclosed(text)
        if closers is not None:
            with contextlib.suppress(ValueError, RecursionError):
                found = json.loads(text + closers)
    return found


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


def _call(data: Any, tools: Sequence[ToolSpec]) -> ToolCall | None:
    if not isinstance(data, dict):
        return None
    known = {t.name: t for t in tools}
    name = next((data[k] for k in _NAME_KEYS if isinstance(data.get(k), str)), None)
    if isinstance(data.get("function"), dict):  # {"function": {"name": ..., "arguments": ...}}
        return _call(data["function"], tools)
    if name is not None:
        raw: Any = next((data[k] for k in _ARG_KEYS if k in data), {})
        if isinstance(raw, str):
            raw = _load(raw.strip() or "{}")
        if isinstance(raw, list) and name in known:
            raw = _list_as_arguments(known[name], raw)
        if not isinstance(raw, dict):
            return None
        if name not in known:
            # a tool the model made up, with the arguments of exactly one of ours (recorded,
            # make real-model 2026-12-03 run 5, calls 1 and 4: "add_file" with path and
            # content): that tool; arguments several tools take (a path alone) match none
            return _by_arguments(raw, tools)
        return ToolCall(id=_new_id(), name=name, arguments=_unescaped(raw), from_text=True)
    return _by_arguments(data, tools)


def _list_as_arguments(tool: ToolSpec, items: list[Any]) -> dict[str, Any] | None:
    """A list written as the whole arguments of a tool whose one parameter is a list: that
    parameter (make real-model 2026-12-04 run l, calls 16-24: ``{"name": "run_tests",
    "arguments": ["-q", "test_calc.py"]}`` four times over, each answered that it matched no
    tool). Any other tool's arguments stay an object, and a list is no call of it."""
    properties = tool.parameters.get("properties") or {}
    if len(properties) != 1:
        return None
    ((key, schema),) = properties.items()
    return {key: items} if isinstance(schema, dict) and schema.get("type") == "array" else None


def _by_arguments(arguments: dict[str, Any], tools: Sequence[ToolSpec]) -> ToolCall | None:
    """The call of the one tool whose required keys these arguments have, and no key it does
    not take; None when no tool or several match."""
    keys = set(arguments)
    matches = [t for t in tools if _required(t) and _required(t) <= keys <= _allowed(t)]
    if len(matches) != 1:
        return None
    return ToolCall(
        id=_new_id(), name=matches[0].name, arguments=_unescaped(arguments), from_text=True
    )


def _unescaped(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments with each text's escaped line breaks read (``_line_breaks_unescaped``):
    a JSON string a model escaped twice (``"a\\\\nb"``) holds ``\\n``, not line breaks."""
    return {k: _line_breaks_unescaped(v) if isinstance(v, str) else v for k, v in arguments.items()}


def _required(tool: ToolSpec) -> set[str]:
    return set(tool.parameters.get("required") or [])


def _allowed(tool: ToolSpec) -> set[str]:
    return set((tool.parameters.get("properties") or {}).keys())


def _new_id() -> str:
    return f"call_{uuid.uuid4().hex[:16]}"


# A bare fence whose info string came on the next line: "```", "json", then the call (make
# real-model 2026-12-05 run w, calls 3-5: the same edit_file so written three times, each
# taken for a block of code that named no file, and the attempt stalled).
_INFO_ON_NEXT_LINE = re.compile(r"^([ \t]*```)[ \t]*\n[ \t]*(json)[ \t]*\n", re.M | re.I)


def _info_joined(text: str) -> str:
    """``text`` with each fence's info string that came on the line after it put back."""
    return _INFO_ON_NEXT_LINE.sub(r"\1\2\n", text) if "```" in text else text


def recover_text_calls(text: str, tools: Sequence[ToolSpec]) -> list[ToolCall]:
    """The tool calls ``text`` holds when it is nothing but calls of known tools; else []."""
    if not tools or not text.strip():
        return []
    text = _info_joined(text)
    blocks = _objects(text)
    calls = [_call(_load(block), tools) for block in blocks or []]
    if calls and all(call is not None for call in calls):
        return [call for call in calls if call is not None]
    leading = _leading_call(text, tools)
    if leading is not None:
        return [leading]
    assigned = _assigned_call(text, tools)
    if assigned is not None:
        return [assigned]
    return _steps_in_prose(text, tools)


# ``obj['summary'] = "..."``: one key of one dictionary set to a literal, on one line.
_ASSIGNMENT = re.compile(r"""^\s*([A-Za-z_]\w*)\[(["'])([A-Za-z_]\w*)\2\]\s*=\s*(.+?)\s*$""")


def _assigned_call(text: str, tools: Sequence[ToolSpec]) -> ToolCall | None:
    """A call written as Python assignments to one dictionary's keys, each a literal
    (recorded, make real-model 2026-12-03 run 7, call 3: a fenced block of
    ``obj['summary'] = "Added the subtract function ..."``, ``obj['files'] = [...]``,
    ``obj['notes']`` and ``obj['interfaces']``, the finish tool's arguments): the call of the
    one tool those keys fit (``_by_arguments``). Every line of the reply (fences aside) must be
    such an assignment, to the same name."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    lines = [line for line in body.splitlines() if line.strip()]
    found = [_ASSIGNMENT.match(line) for line in lines]
    if not found or any(m is None for m in found):
        return None
    matches = [m for m in found if m is not None]
    if len({m.group(1) for m in matches}) != 1:
        return None
    arguments: dict[str, Any] = {}
    for m in matches:
        value = _literal(m.group(4))
        if value is _NOT_LITERAL or m.group(3) in arguments:
            return None
        arguments[m.group(3)] = value
    return _by_arguments(arguments, tools)


_NOT_LITERAL = object()
_MAX_LITERAL = 200_000  # characters: a reply read as a Python literal is parsed, never run


def _literal(source: str) -> Any:
    """The Python literal ``source`` spells (an f-string without fields read as a string;
    strings joined with ``+``, as one), or ``_NOT_LITERAL``."""
    if source[:1] in "fF" and source[1:2] in "\"'" and "{" not in source:
        source = source[1:]
    try:
        return ast.literal_eval(_JoinedStrings().visit(ast.parse(source.strip(), mode="eval")))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _NOT_LITERAL


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


def _steps_in_prose(text: str, tools: Sequence[ToolSpec]) -> list[ToolCall]:
    """The calls of a reply that explains its steps and writes each as a fenced JSON block
    (recorded, make real-model 2026-12-03 run 3, calls 18-21: "1. **Delete the existing
    `test_calc.py` file**:" then a ```json delete_file block, "2. ..." then a write_file
    block): every fenced block a call of a known tool or plain JSON data (run 8, call 1: a
    "Files" section listing paths as a JSON array before its "Tool Calls" section), each tool
    once per path. The same tool twice on the same path, or twice with no path, is
    alternatives ("or like this"), not steps (tests/fixtures/real_model/planner_run7.json,
    reply 2: one submit_plan block per fix), and a block of code makes it prose."""
    calls: list[ToolCall] = []
    for block in _blocks(text, _INDENTED):
        data = _load(block.body.strip())
        if data is not None and not isinstance(data, dict):
            continue  # a list of names, a number: what the prose shows, not a call
        call = _call(data, tools)
        if call is None:
            return []
        calls.append(call)
    targets = [(call.name, str(call.arguments.get("path"))) for call in calls]
    if len(set(targets)) != len(targets):
        return []
    return calls


def _leading_call(text: str, tools: Sequence[ToolSpec]) -> ToolCall | None:
    """A reply that opens with one whole call of a known tool and then goes on (recorded:
    ``{"name": "run_tests", ...}`` and then a fenced block restating its arguments as Python,
    tests/fixtures/real_model/subtract_run6.json): that call; the rest is commentary."""
    body = text.strip()
    if body.startswith("```"):
        body = body.partition("\n")[2].lstrip()
    if not body.startswith("{"):
        return None
    try:
        data, _ = json.JSONDecoder().raw_decode(body)
    except (ValueError, RecursionError):  # RecursionError: absurd nesting, a hostile reply
        # the call's fenced block alone, up to its closing fence: what it holds may not be
        # JSON as written (a triple-quoted file that never closes, read by _load)
        fence = _closing_fence(body, 0, _ANY_FENCE)
        block = body[: fence.start()] if fence else ""
        data = _load(block) if '"""' in block else None
    return _call(data, tools)


def fenced_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a prose reply's fenced blocks, read as leniently as calls are
    (doubled braces, triple-quoted strings); blocks that are not objects are left out.

    For a policy that knows what a document of its own looks like in prose: the planner's plan
    written as a ```json block after a page of explanation (planner/planner.py)."""
    found = [_load(block.body.strip()) for block in _blocks(_info_joined(text))]
    return [data for data in found if isinstance(data, dict)]


def is_blank(text: str) -> bool:
    """Whether a reply says nothing: no text, or empty code fences alone (run r)."""
    return not text.replace("```", "").strip()


def text_call_problem(text: str, tools: Sequence[ToolSpec]) -> str | None:
    """Why ``text``, which looks like a tool call written as text, is not one; None when it
    does not look like a call at all (nor do empty code fences alone: make real-model
    2026-12-05 run r sent "```\n```" three times, each answered as a call mixed with text)."""
    if not tools or not _LOOKS_LIKE_CALL.search(text) or is_blank(text):
        return None
    blocks = _objects(_info_joined(text))
    if blocks is None:
        return "it held a tool call mixed with other text"
    data = [_load(block) for block in blocks]
    broken = [i for i, d in enumerate(data) if d is None]
    if broken and len(blocks) == 1:
        return "its tool call was not valid JSON"
    if broken:
        which = ", ".join(_ordinal(i + 1) + _named(blocks[i]) for i in broken)
        return (
            f"of its {len(blocks)} tool calls, the {which} {'was' if len(broken) == 1 else 'were'}"
            " not valid JSON"
        )
    names = [
        d.get(k)
        for d in data
        if isinstance(d, dict)
        for k in _NAME_KEYS
        if isinstance(d.get(k), str)
    ]
    unknown = [n for n in names if n not in {t.name for t in tools}]
    if unknown:
        return f"it called {', '.join(map(str, unknown))}, which is not a tool here"
    return "its arguments matched no tool's"


_NAMED = re.compile(r'"(?:name|tool|tool_name|function)"\s*:\s*"([A-Za-z_][\w.-]{0,63})"')


def _named(block: str) -> str:
    found = _NAMED.search(block)
    return f" ({found.group(1)})" if found else ""


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def text_call_nudge(problem: str, tools: Sequence[ToolSpec]) -> str:
    """What the model is told after a reply that held a tool call as text."""
    names = ", ".join(sorted(t.name for t in tools))
    return (
        f"Your reply held a tool call as text ({problem}), so nothing was run. Call tools "
        f"through the tools interface, one JSON object of arguments per call; the tools are: "
        f"{names}."
    )
