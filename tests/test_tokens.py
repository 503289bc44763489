"""Token counts by pieces (issue 29): ``count_joined`` is exactly the count of the joined text."""

from __future__ import annotations

import random
from pathlib import Path

from anti_sprawl.context.sections import SECTION_HEADERS, brief_pieces, render_brief
from anti_sprawl.outline.parsed import file_entries
from anti_sprawl.outline.views import render_outline
from anti_sprawl.plan.model import Plan
from anti_sprawl.tokens import _BPE_FILE, count_joined, count_tokens, joins_safely
from anti_sprawl.trust import data_block, wrap_data

# Characters that decide where cl100k's pre-tokens start and end: line breaks, spaces and
# tabs, ASCII punctuation, letters and digits, a contraction's quote, non-ASCII letters,
# digits and spaces, a combining mark, an emoji.
_ALPHABET = "\n\n\r \t  >:.=\"'_-#(sdtxAZ09éü١\u00a0\u3000\u0301😀"


def test_pieces_are_counted_as_the_joined_text_at_every_kind_of_join() -> None:
    rng = random.Random(29)
    for _ in range(4000):
        pieces = [
            "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 10)))
            for _ in range(rng.randint(1, 4))
        ]
        assert count_joined(pieces) == count_tokens("".join(pieces)), pieces


def test_safe_joins_split_real_blocks_and_briefs_exactly() -> None:
    """Every join this accepts as safe, on real prompt material: data blocks of this
    repository's modules and of their outlines (padded line numbers after the opening tag),
    briefs and section headers."""
    root = Path(__file__).resolve().parent.parent
    texts: list[str] = []
    for source in sorted((root / "anti_sprawl" / "context").glob("*.py")):
        text = source.read_text()
        entries = file_entries(source.name, text) or []
        for level in ("names", "signatures", "full"):
            rendered = render_outline(entries, level, len(text.splitlines()), frozenset())
            texts.append(wrap_data("stub", source.name, rendered))
            assert count_joined(data_block("stub", source.name, rendered)) == count_tokens(
                texts[-1]
            )
        texts.append(wrap_data("file", source.name, text))
        assert count_joined(data_block("file", source.name, text)) == count_tokens(texts[-1])
    plan = Plan.model_validate(
        {
            "plan_id": "p",
            "requirement": "  Indented requirement\n\nwith é and a list:\n- one\n",
            "tasks": [
                {"task_id": "a", "name": "A", "goal": "Do a", "write_scope": ["a.py"]},
                {"task_id": "b", "name": "B", "goal": "\n  b", "write_scope": ["b.py"]},
            ],
        }
    )
    for task in plan.tasks:
        assert "".join(brief_pieces(plan, task)) == render_brief(plan, task)
        assert count_joined(brief_pieces(plan, task)) == count_tokens(render_brief(plan, task))
        texts.append(render_brief(plan, task))
    for before in texts:
        for after in [*texts[:6], *SECTION_HEADERS.values()]:
            assert count_joined([before, after]) == count_tokens(before + after)


def test_joins_safely_needs_a_newline_then_no_line_break() -> None:
    assert joins_safely("a\n", "b")
    assert joins_safely('<data kind="stub">\n', " 3: class C")
    assert not joins_safely("a\n", " b")  # the newline and the space may form one token
    assert not joins_safely(">\n", "\nb")  # the punctuation's token takes every newline
    assert not joins_safely("a", "b")
    assert not joins_safely("a\n", "")


def test_kept_counts_are_bounded_and_found_by_content() -> None:
    from anti_sprawl import tokens

    long = "word " * 200  # kept under its digest
    n = count_tokens(long)
    assert count_tokens("".join(["word "] * 200)) == n  # another object, the same content
    for i in range(tokens._CACHE_ENTRIES + 10):
        count_tokens(f"text {i}")
    assert len(tokens._counts) <= tokens._CACHE_ENTRIES
    assert count_tokens(long) == n  # counted again once it was let go


def test_a_request_is_counted_by_pieces_exactly() -> None:
    """A call's input count (budgets, the scripted provider's usage) from its pieces."""
    from anti_sprawl.agent.tools import WORKER_TOOLS
    from anti_sprawl.providers.base import (
        AssistantMessage,
        ModelRequest,
        SystemBlock,
        ToolCall,
        ToolResult,
        ToolResultMessage,
        UserMessage,
        raw_request_tokens,
        request_text,
    )

    call = ToolCall(id="1", name="read_file", arguments={"path": "a.py"})
    messages = [
        UserMessage(content="  an indented brief\n"),
        AssistantMessage(text="", tool_calls=[call]),
        ToolResultMessage(results=[ToolResult(call_id="1", content="\n\nx = 1\n")]),
        UserMessage(content="é"),
    ]
    for k in range(len(messages) + 1):
        request = ModelRequest(
            system=[SystemBlock(text="rules\n"), SystemBlock(text="")],
            tools=list(WORKER_TOOLS),
            messages=messages[:k] or [UserMessage(content="")],
        )
        assert raw_request_tokens(request) == count_tokens(request_text(request))


def test_the_bundled_ranks_are_their_line_numbers() -> None:
    """``tokens._encoding`` numbers the bundled file's tokens by line instead of parsing each
    rank: exact for the file the SHA-256 names, which is this one."""
    lines = _BPE_FILE.read_bytes().splitlines()
    assert len(lines) == 100_256
    assert [int(line.split()[1]) for line in lines] == list(range(len(lines)))
    assert count_tokens("hello world") == 2
