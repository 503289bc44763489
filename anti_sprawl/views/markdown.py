"""Text from a model, a repository or a plan, made inert for a Markdown page (the PR body).

A reviewer's page must not be steered by what a worker wrote: no raw HTML (a trailing ``<!--``
hid the rest of the body), no image or link that loads (a beacon), no ``@mention`` that pings
and no ``Fixes #N`` that closes an issue, and no way for a text to close the block it sits in.
So: prose becomes a fenced block whose fence is longer than any backtick run inside it; short
values (ids, paths, names) become code spans sized the same way, or escaped text; ``@`` before a
name and ``#`` before a number become their full-width forms, visible and inert everywhere.
"""

from __future__ import annotations

import html
import re

__all__ = ["block", "code", "defuse", "fence_for", "text"]

_MENTION = re.compile(r"@(?=[A-Za-z0-9_-])")
_ISSUE = re.compile(r"#(?=\d)")
_SPECIAL = re.compile(r"([\\`*_\[\]()#!|~])")
_BACKTICKS = re.compile(r"`+")


def defuse(value: str) -> str:
    """``@name`` and ``#123`` that ping or close nothing (full-width ＠ and ＃)."""
    return _ISSUE.sub("\uff03", _MENTION.sub("\uff20", value))


def fence_for(content: str, char: str = "`") -> str:
    """A fence longer than every run of ``char`` in ``content`` (at least three)."""
    runs = [len(m) for m in re.findall(re.escape(char) + "+", content)]
    return char * max(3, max(runs, default=0) + 1)


def block(content: str, info: str = "text") -> str:
    """``content`` as a fenced block nothing inside can close."""
    body = defuse(content.replace("\r", "")).rstrip("\n")
    fence = fence_for(body)
    return f"{fence}{info}\n{body}\n{fence}"


def code(value: str) -> str:
    """One line as a code span sized to its backticks (inert: no HTML, links or markup)."""
    one = defuse(" ".join(value.split()))
    if not one:
        return "-"
    ticks = "`" * (max((len(m) for m in _BACKTICKS.findall(one)), default=0) + 1)
    pad = " " if one.startswith("`") or one.endswith("`") else ""
    # A table cell ends at an unescaped pipe, even inside a code span (GitHub's tables).
    return f"{ticks}{pad}{one}{pad}{ticks}".replace("|", "\\|")


def text(value: str) -> str:
    """One line of escaped text: HTML as entities, Markdown punctuation backslashed."""
    one = " ".join(value.split())
    return _SPECIAL.sub(r"\\\1", html.escape(defuse(one), quote=False))
