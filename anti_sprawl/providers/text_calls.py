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

import itertools
import json
import re
import shlex
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from .base import ToolCall, ToolSpec
from .loose_json import NOT_LITERAL, line_breaks_unescaped, load_loose, python_literal

__all__ = [
    "echoes_data_label",
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
_LOOKS_LIKE_CALL = re.compile(
    r"^\s*(\{|```|<tool_call>|<tools>|<function\b)|\"(name|arguments)\"\s*:", re.S
)
# A call as the attributes of a tag, its arguments JSON in single quotes, alone or inside
# ``<tools>``: recorded from Qwen2.5-Coder-1.5B after a restart of its conversation (make
# real-model 2026-12-05, run x's request 13 restarted, 2 replies of 9 in experiments):
# ``<tools>\n  <function name="run_tests" arguments='[]'/>\n</tools>``.
_FUNCTION_TAG = re.compile(
    r"""<function\s+name="([A-Za-z_][\w.-]{0,63})"\s+arguments='(.*?)'\s*(?:/>|>\s*</function>)""",
    re.S,
)
_TOOLS_WRAPPER = re.compile(r"^<tools>(.*)</tools>$", re.S)


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
    if body.startswith(("<tools>", "<function")):
        return _function_tags(body)
    if not body.startswith("{"):
        return None
    if load_loose(body) is None:  # not one object written over several lines
        calls = _one_per_line(body)
        if len(calls) > 1:
            return [_undouble_outer(call) for call in calls]
    return [_undouble_outer(body)]


def _function_tags(body: str) -> list[str] | None:
    """The calls of text that is only ``<function name=... arguments='...'/>`` tags (inside
    ``<tools>`` or not), each as the JSON text of a call, or only JSON calls inside
    ``<tools>`` (the same experiments: ``<tools>\n{"name": "write_file", ...}\n{...}``);
    None when it holds anything else."""
    wrapped = _TOOLS_WRAPPER.match(body)
    inner = wrapped.group(1) if wrapped else body
    if wrapped and inner.strip().startswith("{"):
        return _objects(inner)
    found = _FUNCTION_TAG.findall(inner)
    if not found or _FUNCTION_TAG.sub("", inner).strip():
        return None
    return [f'{{"name": {json.dumps(name)}, "arguments": {args}}}' for name, args in found]


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
        if body.endswith("}") and isinstance(load_loose(body), dict):
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
            raw = load_loose(raw.strip() or "{}")
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
    """The arguments with each text's escaped line breaks read (``line_breaks_unescaped``):
    a JSON string a model escaped twice (``"a\\\\nb"``) holds ``\\n``, not line breaks."""
    return {k: line_breaks_unescaped(v) if isinstance(v, str) else v for k, v in arguments.items()}


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
    calls = [_call(load_loose(block), tools) for block in blocks or []]
    if calls and all(call is not None for call in calls):
        return [call for call in calls if call is not None]
    leading = _leading_call(text, tools)
    if leading is not None:
        return [leading]
    assigned = _assigned_call(text, tools)
    if assigned is not None:
        return [assigned]
    command = _command_line_call(text, tools)
    if command is not None:
        return [command]
    return _steps_in_prose(text, tools)


def _command_line_call(text: str, tools: Sequence[ToolSpec]) -> ToolCall | None:
    """A reply that is one line, fences aside, written as a command line: the name of a
    known tool whose one argument is a list of strings, then those strings (recorded, make
    real-model 2026-12-05 run ai, calls 25 and 28: ``run_tests -q`` in a fence, answered that
    the block named no file; call 30 held a finish after it). Only such a tool: a path and a
    file's text on a command line are not told apart from prose (agent/file_blocks.py reads
    ``write_file PATH`` as a file's label)."""
    lines = [line.strip() for line in text.splitlines() if line.strip().strip("`")]
    if len(lines) != 1:
        return None
    name, _, rest = lines[0].partition(" ")
    tool = next((t for t in tools if t.name == name), None)
    properties = tool.parameters.get("properties", {}) if tool else {}
    if tool is None or len(properties) != 1:
        return None
    ((key, schema),) = properties.items()
    if schema.get("type") != "array" or schema.get("items", {}).get("type") != "string":
        return None
    try:
        words = shlex.split(rest)
    except ValueError:  # an unclosed quote
        return None
    return ToolCall(id=_new_id(), name=name, arguments={key: words}, from_text=True)


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
        value = python_literal(m.group(4))
        if value is NOT_LITERAL or m.group(3) in arguments:
            return None
        arguments[m.group(3)] = value
    return _by_arguments(arguments, tools)


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
        data = load_loose(block.body.strip())
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
        # JSON as written (a triple-quoted file that never closes, read by load_loose)
        fence = _closing_fence(body, 0, _ANY_FENCE)
        block = body[: fence.start()] if fence else ""
        data = load_loose(block) if '"""' in block else None
    return _call(data, tools)


def fenced_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a prose reply's fenced blocks, read as leniently as calls are
    (doubled braces, triple-quoted strings); blocks that are not objects are left out.

    For a policy that knows what a document of its own looks like in prose: the planner's plan
    written as a ```json block after a page of explanation (planner/planner.py)."""
    found = [load_loose(block.body.strip()) for block in _blocks(_info_joined(text))]
    return [data for data in found if isinstance(data, dict)]


_DATA_LABEL = frozenset({"kind", "source", "trust"})


def echoes_data_label(text: str) -> bool:
    """Whether ``text`` is only the attributes of our data tag written back as JSON
    (``{"kind": "file", "source": "calc.py", "trust": "untrusted"}``: make real-model
    2026-12-05 run z, four times running, and 8 of 10 times again in experiments)."""
    blocks = _objects(_info_joined(text.strip())) if "source" in text else None
    data = [load_loose(block) for block in blocks or []]
    return bool(data) and all(
        isinstance(d, dict) and {"kind", "source"} <= d.keys() <= _DATA_LABEL for d in data
    )


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
    data = [load_loose(block) for block in blocks]
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
