"""How many output tokens one response may have: per-model defaults, and the time it may take.

A cap that is too low cuts a response mid tool call (a large ``write_file`` is lost); one above
what the model allows is refused by the API. The table follows the providers' published limits
(Anthropic's models overview, OpenAI's model pages; checked 2026-10): the longest matching name
prefix wins. An unknown model on a known API gets a value every current model accepts; an unknown
model on an OpenAI-compatible local server (``--base-url``) gets 4,096, what small local servers
commonly allow. ``--max-output-tokens`` overrides all of this; the worker still asks for no more
than what the node's token budget leaves.
"""

from __future__ import annotations

import re
import zlib

from ..trust import FILE_TAG

__all__ = [
    "DEFAULT_LOCAL_LIMIT",
    "HOSTED_REQUEST_TIMEOUT",
    "LOCAL_REQUEST_TIMEOUT",
    "RAN_ON",
    "WRITE_IN_PARTS",
    "call_deadline",
    "cut_message",
    "default_output_limit",
    "echoed_answer_at",
    "ran_on",
    "repeating",
    "response_timeout",
    "unfinished_tag_at",
]

# A model the table does not know, behind --base-url: most often a small local model on a
# CPU, whose runaway replies (the same lines over and over, never stopping) run to the cap at
# 4-9 tokens a second: 15-20 minutes each at 4,096. Of the 235 replies recorded from
# Qwen2.5-Coder-1.5B (tests/fixtures/real_model/ and make real-model 2026-12-03, runs 7-10),
# none that stopped on its own was longer than 1,306 tokens (every worker reply: 695), and
# the two runaways went to the cap; a longer write is cut and told to go on in parts
# (``cut_message``), and --max-output-tokens raises it.
DEFAULT_LOCAL_LIMIT = 2_048

# (name prefix, max output tokens), checked longest prefix first.
_ANTHROPIC: dict[str, int] = {
    "claude-fable-": 128_000,
    "claude-opus-5": 128_000,
    "claude-sonnet-5": 128_000,
    "claude-haiku-5": 128_000,
    "claude-opus-4-8": 128_000,
    "claude-opus-4-7": 128_000,
    "claude-opus-4-6": 128_000,
    "claude-sonnet-4-6": 128_000,
    "claude-opus-4-5": 64_000,
    "claude-sonnet-4-5": 64_000,
    "claude-haiku-4-5": 64_000,
    "claude-opus-4-1": 32_000,
    "claude-opus-4": 32_000,
    "claude-sonnet-4": 64_000,
    "claude-3-7-sonnet": 64_000,
    "claude-3-5-": 8_192,
    "claude-3-": 4_096,
}
_ANTHROPIC_UNKNOWN = 32_000  # every Claude model since Opus 4 allows at least this

_OPENAI: dict[str, int] = {
    "gpt-5": 128_000,
    "gpt-5-chat": 16_384,
    "gpt-4.1": 32_768,
    "gpt-4o": 16_384,
    "gpt-4-turbo": 4_096,
    "gpt-4": 8_192,
    "gpt-3.5": 4_096,
    "o1": 100_000,
    "o3": 100_000,
    "o4-mini": 100_000,
}
_OPENAI_UNKNOWN = 16_384  # every current OpenAI chat model allows at least this

# The scripted provider has no server limit; this is what a current model allows.
_SCRIPTED = 128_000

# Sizing a request's timeout: the client's timeout covers a response of _BASE_TOKENS; each
# token the request allows beyond that adds time at a slow output speed, so a long answer
# (a whole module in one write_file) is not cut off and retried.
_BASE_TOKENS = 4_096
_TOKENS_PER_SECOND = 40.0


def _lookup(table: dict[str, int], model: str) -> int | None:
    name = model.strip().lower()
    for prefix in sorted(table, key=len, reverse=True):
        if name.startswith(prefix):
            return table[prefix]
    return None


def default_output_limit(provider: str, model: str, *, local_server: bool = False) -> int:
    """The default output cap for ``model`` on ``provider`` (``anthropic``/``openai``/...).

    ``local_server``: the OpenAI provider talks to a ``--base-url`` server; a model name the
    table does not know there gets ``DEFAULT_LOCAL_LIMIT``.
    """
    if provider == "scripted":
        return _SCRIPTED
    if provider == "anthropic":
        return _lookup(_ANTHROPIC, model) or _ANTHROPIC_UNKNOWN
    known = _lookup(_OPENAI, model)
    if known is not None:
        return known
    return DEFAULT_LOCAL_LIMIT if local_server else _OPENAI_UNKNOWN


def response_timeout(base: float, max_output_tokens: int) -> float:
    """Seconds to wait for one non-streamed response that may hold ``max_output_tokens``."""
    return base + max(0, max_output_tokens - _BASE_TOKENS) / _TOKENS_PER_SECOND


# The overall deadline of one model call (one HTTP request) by default: a hosted API answers a
# 4k-token response well inside two minutes; a CPU server behind --base-url takes 100-440 s to
# read a 2-4k-token first prompt alone (issue 23), so it gets fifteen minutes.
HOSTED_REQUEST_TIMEOUT = 120.0
LOCAL_REQUEST_TIMEOUT = 900.0


def call_deadline(request_timeout: float | None, max_output_tokens: int, *, local: bool) -> float:
    """Seconds one call may take in all, from the request to the last byte of its body.

    ``request_timeout`` (``--request-timeout``, ``ANTI_SPRAWL_REQUEST_TIMEOUT``) is that deadline
    exactly; without it the default of the server kind, widened for a long answer.
    """
    if request_timeout is not None:
        return request_timeout
    base = LOCAL_REQUEST_TIMEOUT if local else HOSTED_REQUEST_TIMEOUT
    return response_timeout(base, max_output_tokens)


WRITE_IN_PARTS = (
    "Write large files in parts: write_file with the first part, then write_file with "
    "append: true for each next part."
)


RAN_ON = (
    "It ran on, repeating itself or writing what a tool would answer: send one tool call, or "
    "one file, and stop there."
)
# Our tags and the chat template's tool-result tag: a reply that holds one is writing the
# answer it expects, not its own turn.
_DATA_TAG = '<data kind="'
# A whole file in our data tag, the way the brief shows one (context/lean.py): its source a
# bare path, not a tool's ("read_file calc.py"). A small model writes its changed file back
# that way (make real-model 2026-12-05 run ag, call 8: calc.py with add() and a new
# subtract(); 2026-12-04 run g, call 21: calc.py and test_calc.py, both right), and
# agent/file_blocks.py reads it as the file.
# Its content holds no tag of ours: trust.escape_data escapes them in every block we show.
_FILE_OPENING = re.compile(FILE_TAG)
_FILE_BLOCK = re.compile(FILE_TAG + r'(?:(?!<data kind=").)*?</data>', re.S)


def echoed_answer_at(text: str, *, growing: bool = False) -> int | None:
    """Where ``text`` starts writing what a tool would answer (our data tag, or the chat
    template's ``<tool_response>``), if it does: the model's turn is over there (recorded,
    make real-model 2026-12-04: run f's planner wrote its tools' refusals as ``<tool_response>``
    blocks to the output cap three times, 4-9 minutes each).

    A whole file in our data tag, closed, is the model's file, not an answer (``_FILE_BLOCK``);
    while the text still grows (``growing``: a streamed answer, providers/streamed.py) one not
    closed yet is not judged, and the whole text is judged again when it ends."""
    found = [text.find("<tool_response>"), _data_answer_at(text, growing)]
    return min((at for at in found if at is not None and at >= 0), default=None)


def _data_answer_at(text: str, growing: bool) -> int | None:
    """Where the first of our data tags that is not a whole file begins, if one does."""
    at = text.find(_DATA_TAG)
    while at >= 0:
        block = _FILE_BLOCK.match(text, at)
        if block is None:
            return None if growing and _undecided(text, at) else at
        at = text.find(_DATA_TAG, block.end())
    return None


def _undecided(text: str, at: int) -> bool:
    """Whether the tag at ``at`` of a text still growing may yet be a whole file's: the tag
    itself not written to its ``>`` yet (make real-model 2026-12-05 run ah, call 5), or a
    file's opening with no other tag of ours after it, its end still to come."""
    opening = _FILE_OPENING.match(text, at)
    return ">" not in text[at:] or (opening is not None and _DATA_TAG not in text[opening.end() :])


def unfinished_tag_at(text: str) -> int | None:
    """Where ``text`` ends in an opening data tag still being written: a file's or an
    answer's, which the next part of a streamed answer decides."""
    at = text.rfind("<")
    if at < 0 or ">" in text[at:]:
        return None
    rest = text[at:]
    return at if _DATA_TAG.startswith(rest) or rest.startswith(_DATA_TAG) else None


def repeating(text: str) -> bool:
    """Whether ``text`` has started over and over: its last 2,000 characters compress to
    under a tenth (one digit or line over and over), or its last 600 characters are there
    twice before, verbatim (a longer passage in a loop: make real-model 2026-12-04, second
    session, run i call 15, a 900-character report written 8 times to the cap, whose 2,000
    characters compress only to a fifth).

    Measured on windows ending every 256 characters of real code (``anti_sprawl/``,
    ``tests/``, pydantic, rich, openai, dask, numpy: 54,937 windows), 94 (0.17%) are judged
    repeating: 12 by the first test (all rich's spinner frames), the rest by the second, all
    in generated code (the openai SDK's resources, dask's tests). Every recorded reply that
    ran to the cap (13) is judged so within its first 3,840 characters, and no reply that
    stopped on its own is."""
    tail = text[-2000:].encode("utf-8", "replace")
    if len(tail) >= 500 and len(zlib.compress(tail)) * 10 < len(tail):
        return True
    return len(text) >= _PASSAGE * 3 and text[:-_PASSAGE].count(text[-_PASSAGE:]) >= 2


_PASSAGE = 600


def ran_on(text: str) -> bool:
    """Whether a response cut at the output limit ran on rather than held a large write: it
    repeats itself or echoes a tool's answer (recorded, make real-model 2026-12-04: calc.py's
    test with a number of 1,700 zeros, run b; a hallucinated ``<tool_response>`` of the test
    run, run d call 26; each told "write large files in parts", which run d's next reply tried
    to do)."""
    return echoed_answer_at(text) is not None or repeating(text)


def cut_message(max_output_tokens: int, text: str, advice: str = WRITE_IN_PARTS) -> str:
    """What a model is told when its response (``text``) hit the output limit, or was stopped
    because it ran on (providers/streamed.py): its tool call is lost; ``advice``, unless it
    ran on."""
    if ran_on(text):
        return (
            "Your response was stopped before its end, so the tool call in it was lost and "
            f"nothing was done. {RAN_ON}"
        )
    return (
        f"Your response was cut at {max_output_tokens:,} output tokens (the output limit), so "
        f"the tool call in it was lost and nothing was done. {advice}"
    )
