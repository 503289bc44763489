"""A node's commit message and trailers, the same for a local and a remote attempt.

The subject is the node's name; the body is git's diffstat of the change, then the worker's
summary as its claim, redacted (it is the model's text: a token it copied must not reach the
branch) and wrapped at 72 columns as git tools
expect. ``Anti-Sprawl-Tokens`` counts what the verdict counts: every attempt of the node, and
says which attempt of how many landed (the views' words, run/node.py's counter).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from ..fs.scope_grant import ScopeGrant
from ..git.branch import (
    TRAILER_RUN,
    TRAILER_SCOPE_GRANTED,
    TRAILER_SCOPE_REFUSED,
    TRAILER_TASK,
    TRAILER_TOKENS,
)
from ..git.workspace import Trailers
from ..providers.base import Usage
from ..redact import Redactor
from .node_job import NodeJob

__all__ = ["BODY_WIDTH", "commit_text", "wrap_body"]

BODY_WIDTH = 72


def wrap_body(text: str, width: int = BODY_WIDTH) -> str:
    """Paragraphs refilled to ``width``; indented lines (code, lists' details) and long
    words (paths, URLs) are kept whole."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width or line.startswith((" ", "\t")):
            out.append(line)
        else:
            out += textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False)
    return "\n".join(out)


def commit_text(
    job: NodeJob,
    summary: str,
    attempt_tokens: Usage,
    redactor: Redactor,
    *,
    changed: str | None = None,
    grants: Sequence[ScopeGrant] = (),
    unclaimed: str = "",
) -> tuple[str, Trailers]:
    """(message, trailers) of the commit of ``job``'s attempt; with ``changed`` (git's diff
    --stat), the body says what changed first and presents the summary as the worker's claim;
    with ``unclaimed``, it says the worker never called finish and why its change was taken."""
    node, record = job.node, job.record
    total = record.total_tokens.total + attempt_tokens.total  # earlier attempts, then this one
    counted = f"attempt {record.counted + 1} of {record.max_attempts}"
    trailers: dict[str, str | tuple[str, ...]] = {
        TRAILER_RUN: job.run_id,
        TRAILER_TASK: node.task_id,
        TRAILER_TOKENS: f"{total} over every attempt ({counted}; cap {node.token_budget} per call)",
    }
    # One line per scope request (run/scope_grants.py): ``<mode> <path>``, the path as the
    # record keeps it (printable, plain; a refused odd one is shown escaped).
    for key, granted in ((TRAILER_SCOPE_GRANTED, True), (TRAILER_SCOPE_REFUSED, False)):
        lines = tuple(
            dict.fromkeys(
                f"{g.mode} {redactor(g.path)}" for g in grants if g.granted is granted and g.path
            )
        )
        if lines:
            trailers[key] = lines
    body = wrap_body(redactor(summary))
    if unclaimed:
        body = wrap_body(redactor(unclaimed_text(unclaimed)))
    elif changed is not None:
        body = f"The worker's summary (its claim, not checked):\n{body}"
    if changed is not None:
        body = f"Changed (git diff --stat):\n{redactor(changed)}\n\n{body}"
    return redactor(node.name) + (f"\n\n{body}" if body else ""), trailers


def unclaimed_text(why: str) -> str:
    """What a commit or a PR says of a change taken without the worker's finish."""
    return (
        f"The worker never called finish ({why}); its change was taken because the whole "
        "test command passes on it. There is no summary: read the diff."
    )
