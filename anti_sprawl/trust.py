"""Trust boundaries: repository content and tool output go into prompts as delimited data.

``wrap_data`` puts untrusted text inside ``<data kind=… source=… trust=…>…</data>`` and
neutralizes anything inside it that looks like one of our structural tags: a ``<`` that opens
or closes a reserved tag name (``data``, ``system``, ``file``, our section names…) gets a
backslash after it, so ``</data>`` becomes ``<\\/data>`` and ``<system>`` becomes
``<\\system>``. The scheme is a pure function of the text, which keeps prompts byte-stable for
caching. Hidden Unicode (zero-width, bidi controls, tag characters) is counted, not removed:
enforcement never depends on it, but the manifest flags it (docs/security.md PI-7).
"""

from __future__ import annotations

import html
import re

__all__ = [
    "FILE_TAG",
    "RESERVED_TAGS",
    "count_hidden_chars",
    "data_block",
    "escape_data",
    "wrap_data",
]

# Every tag name our prompts use for structure, plus the chat-role names a forged block would
# most likely try (system, user, assistant, tool...).
RESERVED_TAGS = (
    "assistant",
    "brief",
    "data",
    "data_policy",
    "developer",
    "file",
    "files",
    "instructions",
    "memory",
    "role",
    "rules",
    "stubs",
    "system",
    "tool",
    "tool_result",
    "tools",
    "upstream",
    "user",
)

# Invisible characters a model may read as separators: whitespace, zero-width and bidi controls.
_INVISIBLE = r"\s\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_TAG_OPEN = re.compile(
    rf"<(?=[{_INVISIBLE}]*/?[{_INVISIBLE}]*(?:{'|'.join(RESERVED_TAGS)})(?![A-Za-z0-9_-]))",
    re.IGNORECASE,
)
_HIDDEN = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\U000e0000-\U000e007f]"
)


def escape_data(text: str) -> str:
    """``text`` with every reserved-tag ``<`` turned into ``<\\`` so it cannot open or close one."""
    return _TAG_OPEN.sub("<\\\\", text) if "<" in text else text


def count_hidden_chars(text: str) -> int:
    """How many zero-width, bidi-control, soft-hyphen or Unicode-tag characters ``text`` holds
    (none in ASCII text, which ``str.isascii`` knows without a scan: every scoped file of a
    plan's pre-flight is counted, issue 29)."""
    return 0 if text.isascii() else len(_HIDDEN.findall(text))


# The opening tag of a whole file as a prompt shows one (``wrap_data("file", path, text)``:
# context/lean.py), its source a bare path, captured; a tool's answer names the tool
# ("read_file calc.py"). A small model writes its changed files back this way
# (providers/limits.py, agent/file_blocks.py).
FILE_TAG = r'<data kind="file" source="([^"\s]+)"[^>\n]*>'


def wrap_data(kind: str, source: str, text: str, *, trust: str = "untrusted") -> str:
    """``text`` as one delimited data block; attributes are HTML-escaped, content tag-escaped."""
    return "".join(data_block(kind, source, text, trust=trust))


def data_block(
    kind: str, source: str, text: str, *, trust: str = "untrusted"
) -> tuple[str, str, str]:
    """``wrap_data``'s block in three pieces: the opening tag line, the escaped content (ending
    in a newline) and the closing tag line; the content piece is the same for the same text,
    whatever its kind and source (token counts are kept per piece: ``tokens.count_joined``)."""
    body = escape_data(text)
    if not body.endswith("\n"):
        body += "\n"
    attrs = " ".join(
        f'{name}="{html.escape(value, quote=True)}"'
        for name, value in (("kind", kind), ("source", source), ("trust", trust))
    )
    return f"<data {attrs}>\n", body, "</data>\n"
