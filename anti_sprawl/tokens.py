"""Offline token counting.

We ship OpenAI's ``cl100k_base`` BPE ranks (``data/cl100k_base.tiktoken``, checked against
its published SHA-256) and build the ``tiktoken`` encoding from that file, so nothing is
fetched at run time. Other models tokenize differently; ``TokenCounter`` keeps a per-run
calibration factor learned from the usage the provider reports for each call.

The same text is counted many times in a run (a file's content in every prompt that holds it,
a section on every budget check, the system prompt on every call): counts are kept by content
(a short text under itself, a longer one under its hash), so each distinct text is encoded once
per process (issue 29); ``count_joined`` counts a text from pieces others share.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["TokenCounter", "count_joined", "count_tokens", "fill_budget", "joins_safely"]

_T = TypeVar("_T")

_BPE_FILE = Path(__file__).with_name("data") / "cl100k_base.tiktoken"
_BPE_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


@lru_cache(maxsize=1)
def _encoding() -> Any:
    from binascii import a2b_base64

    import tiktoken

    raw = _BPE_FILE.read_bytes()
    if hashlib.sha256(raw).hexdigest() != _BPE_SHA256:
        raise RuntimeError(f"{_BPE_FILE} is corrupted (sha256 mismatch)")
    # 100,256 lines of "<base64 token> <rank>": decoded with binascii directly, as
    # base64.b64decode would but without its per-call checks (a third of the load, which
    # validate --repo pays once: issue 29, item 3). The file is the one the hash names, whose
    # ranks are its line numbers (tests/test_tokens.py reads them): counting them is exact and
    # saves parsing 100,256 integers (0.01 s)
    tokens = raw.split()[::2]
    ranks = dict(zip(map(a2b_base64, tokens), range(len(tokens)), strict=True))
    return tiktoken.Encoding(
        name="cl100k_base_bundled",
        pat_str=_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 100257},
    )


_CACHE_ENTRIES = 8192  # distinct texts kept, with their counts
# A text up to this long is kept under itself: a str caches its hash, so the same object
# (a constant piece, a section header, "</data>\n") is found at once; a longer one under a
# 16-byte digest. At most ~2 MiB of keys.
_KEYED = 256
_counts: OrderedDict[str | bytes, int] = OrderedDict()
_counts_lock = threading.Lock()


def count_tokens(text: str) -> int:
    """Tokens in ``text`` under cl100k_base (special-token text is counted as plain text)."""
    if not text:
        return 0
    if len(text) <= _KEYED:
        key: str | bytes = text
    else:
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    with _counts_lock:
        found = _counts.get(key)
        if found is not None:
            _counts.move_to_end(key)
            return found
    n = len(_encoding().encode_ordinary(text))
    with _counts_lock:
        _counts[key] = n
        if len(_counts) > _CACHE_ENTRIES:
            _counts.popitem(last=False)
    return n


def joins_safely(before: str, after: str) -> bool:
    """Whether no cl100k token can span the join of ``before`` and ``after``, which then
    split exactly as they do alone. ``before`` ends with a newline, and either ``after``
    starts with a visible ASCII character (no pre-token of the pattern joins a newline to a
    following non-space: those that may hold one are whitespace only, or end at it), or the
    newline follows ASCII punctuation and ``after`` starts with no line break (the
    punctuation's pre-token takes the newlines after it and ends there: a data block's
    opening tag line, then an outline whose first line number is padded with a space)."""
    if not before.endswith("\n") or not after:
        return False
    first = after[0]
    if first.isascii() and first.isprintable() and first != " ":
        return True
    mark = before[-2:-1]
    return (
        mark.isascii()
        and mark.isprintable()
        and not mark.isalnum()
        and mark != " "
        and first not in "\r\n"
    )


def count_joined(pieces: Sequence[str]) -> int:
    """``count_tokens("".join(pieces))``, exactly, with each run of pieces between safe joins
    (``joins_safely``) counted on its own: a piece many texts share (a file's content in the
    blocks of different paths, a plan's requirement in every brief) is encoded once."""
    total = 0
    run = ""
    for piece in pieces:
        if not piece:
            continue
        if run and not joins_safely(run, piece):
            run += piece
            continue
        total += count_tokens(run)
        run = piece
    return total + count_tokens(run)


class TokenCounter:
    """Estimates a provider's token counts offline, calibrated by the usage it reports.

    ``estimate`` scales the cl100k count by the observed ratio (provider tokens / our tokens),
    kept as an exponential moving average and never below 1.0 before the first observation,
    so budget checks err on the side of stopping early rather than overrunning.
    """

    def __init__(self, ratio: float = 1.0):
        self._ratio = ratio
        self._observed = False
        self._lock = threading.Lock()

    @property
    def ratio(self) -> float:
        return self._ratio

    def estimate(self, text: str) -> int:
        return self.scale(count_tokens(text))

    def scale(self, base: int) -> int:
        """The estimate for ``base`` cl100k tokens (what ``estimate`` gives for a text of them)."""
        return int(base * self._ratio + 0.999) if base else 0

    def observe(self, estimated_raw: int, reported: int) -> None:
        """Feed back one call: ``estimated_raw`` is our unscaled count, ``reported`` the provider's."""
        if estimated_raw <= 0 or reported <= 0:
            return
        sample = reported / estimated_raw
        with self._lock:
            self._ratio = sample if not self._observed else 0.7 * self._ratio + 0.3 * sample
            self._observed = True


def fill_budget(
    items: Iterable[_T], cost: Callable[[_T], int], budget: int, *, skip: bool = False
) -> tuple[list[_T], int]:
    """The items, in order, whose costs fit ``budget`` in all, and the tokens they use.

    The first item that does not fit ends the fill (a text cut at a line), or, with
    ``skip``, is passed over so a cheaper later one may still fit (ranked files in a share).
    The one greedy fill of ``context.guidance`` and ``planner.reference_scope``."""
    chosen: list[_T] = []
    used = 0
    for item in items:
        price = cost(item)
        if used + price > budget:
            if skip:
                continue
            break
        chosen.append(item)
        used += price
    return chosen, used
