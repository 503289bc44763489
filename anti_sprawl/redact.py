"""The one redactor: every way out of the process passes secrets through it.

Secret *files* never reach a prompt (the firewall refuses them); this is the net for secrets
inside ordinary files, tool output, test logs, summaries and error messages: the exact values
of the secret-looking environment variables the CLI was started with (API keys included), and
the content shapes of the secret catalogue (cloud and forge tokens, private-key blocks in PEM,
OpenSSH, PGP and PuTTY form, passwords in URLs). Each is replaced by ``[REDACTED:<kind>]``,
the one placeholder format of the tool; ``http=True`` adds the shapes of HTTP credentials
(``Authorization`` headers, bearer tokens) for provider error text. The same catalogue drives
the pre-commit scan (``findings``), so what is redacted on the way out is also what a node may
not commit. Writing a placeholder back into a file is refused by the worker, so a real secret
is never overwritten with its placeholder.

A text is redacted many times on its way out (a record on each journal change, a prompt
section in every request that holds it): results are kept by content hash per redactor, so
each distinct text is scanned once (issue 29), short ones too (a record's field names and
statuses, the tool schemas' ``"string"`` and ``"object"``: most of the texts a node redacts);
the catalogue and values of a redactor never change, so a kept result stays right.

It imports nothing of ours, so every layer can use it: the provider errors redact the SDK's
messages with it, and ``providers/redacting.py`` wraps a provider so each request is redacted
before it leaves the process.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel

__all__ = [
    "PLACEHOLDER",
    "SECRET_SHAPES",
    "Finding",
    "Redactor",
    "env_secrets",
    "is_secret_name",
    "placeholder",
    "redact_data",
]

PLACEHOLDER = "[REDACTED:"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
_MIN_VALUE = 8
_END = r"(?:-----END {0}-----|\Z)"
# The content half of the secret catalogue (fs.deny_rules.DEFAULT_DENY is the name half).
SECRET_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "pgp-private-key",
        re.compile(
            r"-----BEGIN PGP PRIVATE KEY BLOCK-----[\s\S]*?" + _END.format("PGP PRIVATE KEY BLOCK")
        ),
    ),
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?" + _END.format("[A-Z0-9 ]*PRIVATE KEY")
        ),
    ),
    (
        "putty-private-key",
        re.compile(r"PuTTY-User-Key-File-\d+:[^\n]*\n[\s\S]*?(?:Private-MAC:[^\n]*|\Z)"),
    ),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "aws-secret-key",
        re.compile(r"(?i)(?P<pre>aws_secret_access_key\"?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{40}"),
    ),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("slack-token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}")),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}")),
    ("stripe-key", re.compile(r"\b(?:sk|rk)_live_[A-Za-z0-9]{16,}")),
    ("google-api-key", re.compile(r"\bAIza[A-Za-z0-9_-]{35}\b")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi-token", re.compile(r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}")),
    ("vault-token", re.compile(r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{34,}\b")),
    (
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    ),
    ("url-password", re.compile(r"(?<=://)[^\s:/@]+:[^\s@/]+(?=@)")),
)
# Text each case-sensitive shape cannot match without (one of them, taken from the pattern's
# fixed start): a shape whose text holds none is skipped. A ``\b`` before a pattern keeps
# ``re`` from scanning for its literal prefix, so each of those shapes cost a full pass of
# the regex engine (~0.6 ms on a 31 kB node's manifests and requests, 13 such shapes: 7.9 ms
# of a remote node's landing checks redacting its files, 2026-12-05); ``in`` is a fast scan.
# The case-insensitive shapes have none: Unicode case folding (``ſ`` for ``s``) makes a
# lowered-text check weaker than the pattern.
_NEEDS: dict[str, tuple[str, ...]] = {
    "pgp-private-key": ("-----BEGIN PGP PRIVATE KEY BLOCK-----",),
    "private-key": ("-----BEGIN ",),
    "putty-private-key": ("PuTTY-User-Key-File-",),
    "aws-access-key": ("AKIA", "ASIA"),
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab-token": ("glpat-",),
    "slack-token": ("xox",),
    "slack-webhook": ("https://hooks.slack.com/services/",),
    "anthropic-key": ("sk-ant-",),
    "openai-key": ("sk-",),
    "stripe-key": ("_live_",),
    "google-api-key": ("AIza",),
    "npm-token": ("npm_",),
    "pypi-token": ("pypi-AgEIcHlwaS5vcmc",),
    "vault-token": ("hvs.", "hvb.", "hvr."),
    "huggingface-token": ("hf_",),
    "jwt": ("eyJ",),
    "url-password": ("://",),
}
# HTTP credentials, for text that quotes a request (provider errors); too broad for code.
_HTTP_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("bearer-token", re.compile(r"(?i)(?P<pre>\bbearer\s+)(?!\[REDACTED)[A-Za-z0-9._~+/=-]+")),
    (
        "api-key",
        re.compile(
            r"(?i)(?P<pre>\b(?:authorization|x-api-key|api[-_]key)\"?\s*[:=]\s*\"?)"
            r"(?!\[REDACTED)[^\s\"',}]+"
        ),
    ),
    ("api-key", re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")),  # shorter than a real key: test keys
)
_M = TypeVar("_M", bound=BaseModel)
_KEYED = 256  # texts up to this long are kept under themselves (a str caches its hash)
_CACHED_MAX = 1 << 20  # longer texts are scanned each time, not kept
_CACHE_ENTRIES = 4096


def placeholder(kind: str) -> str:
    """The text that stands in for a redacted secret of ``kind``."""
    return f"{PLACEHOLDER}{kind}]"


class Finding(NamedTuple):
    """One secret found in a text: its kind (``env`` for an exact value) and the value."""

    kind: str
    value: str


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name looks like it holds a secret (``*KEY*``, ...)."""
    return bool(_SECRET_NAME.search(name))


def env_secrets(env: Mapping[str, str]) -> list[str]:
    """Values of secret-looking variables (``*KEY*``, ``*TOKEN*``, ...) long enough to match."""
    return sorted(
        {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v.strip()) >= _MIN_VALUE},
        key=len,
        reverse=True,
    )


class Redactor:
    """Replaces exact secret values and the catalogue's secret shapes in text."""

    def __init__(
        self, values: Iterable[str] = (), *, min_value: int = _MIN_VALUE, http: bool = False
    ):
        self._values = sorted({v for v in values if len(v) >= min_value}, key=len, reverse=True)
        self._shapes = SECRET_SHAPES + (_HTTP_SHAPES if http else ())
        self._ready()

    def _ready(self) -> None:
        """The derived state: each shape's replacement, built once, and the kept results (a
        short text is its own key, a longer one its digest)."""
        self._subs = [
            (pattern, functools.partial(_replace, placeholder(kind)), _NEEDS.get(kind, ()))
            for kind, pattern in self._shapes
        ]
        self._done: OrderedDict[str | bytes, str] = OrderedDict()
        self._clean: OrderedDict[BaseModel, None] = OrderedDict()  # immutable, nothing to redact
        self._done_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """What a copy needs: the values and the catalogue; not the lock, nor the kept
        results (a copy, a ``copy.deepcopy`` or a pickle, starts with none)."""
        return {"_values": self._values, "_shapes": self._shapes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._values = state["_values"]
        self._shapes = state["_shapes"]
        self._ready()

    def __call__(self, text: str) -> str:
        if len(text) > _CACHED_MAX:
            return self._redact(text)
        key: str | bytes = text
        if len(text) > _KEYED:
            key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._done_lock:
            found = self._done.get(key)
            if found is not None:
                self._done.move_to_end(key)
                return found
        out = self._redact(text)
        with self._done_lock:
            self._done[key] = out
            if len(self._done) > _CACHE_ENTRIES:
                self._done.popitem(last=False)
        return out

    def _redact(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, placeholder("env"))
        for pattern, replace, needs in self._subs:
            if needs and not any(word in text for word in needs):
                continue  # the pattern cannot match (``_NEEDS``)
            text = pattern.sub(replace, text)
        return text

    def findings(self, text: str) -> list[Finding]:
        """Every secret in ``text``, in catalogue order (what ``__call__`` would replace)."""
        out = [Finding("env", v) for v in self._values if v in text]
        for kind, pattern in self._shapes:
            for m in pattern.finditer(text):
                pre = m.group("pre") if "pre" in pattern.groupindex else ""
                out.append(Finding(kind, m.group(0)[len(pre or "") :]))
        return out

    def data(self, value: Any) -> Any:
        """``value`` (JSON-like: dicts, lists, strings) with every string redacted."""
        return redact_data(value, self)

    def model(self, model: _M) -> _M:
        """A copy of a pydantic model with every string inside it redacted.

        Built with ``model_copy(update=...)``, not re-validation: a placeholder may be longer
        than the secret it replaces, and a length limit must not turn redaction into a crash.
        """
        redacted: _M = self._value(model)
        return redacted

    def _value(self, value: Any) -> Any:
        return self._walk(value)[0]

    def _known_clean(self, model: BaseModel) -> bool:
        """Whether an equal immutable model was found to hold nothing to redact (equal
        models redact alike): a manifest's items recur in every call of a conversation."""
        try:
            with self._done_lock:
                return model in self._clean
        except TypeError:  # unhashable: a list or dict field
            return False

    def _remember_clean(self, model: BaseModel) -> None:
        if not _hashable(model):
            return
        with self._done_lock:
            self._clean[model] = None
            if len(self._clean) > _CACHE_ENTRIES:
                self._clean.popitem(last=False)

    def _walk(self, value: Any) -> tuple[Any, bool]:
        """``value`` redacted, and whether anything in it changed. An immutable (frozen)
        model with nothing to redact is itself (a manifest's items, a record's usage: most
        of what a node redacts), not a copy; everything else is copied as before."""
        if isinstance(value, str):
            out = self(value)
            return (value, False) if out == value else (out, True)
        if isinstance(value, BaseModel):
            frozen = bool(value.model_config.get("frozen"))
            if frozen and self._known_clean(value):
                return value, False
            walked = {k: self._walk(getattr(value, k)) for k in type(value).model_fields}
            changed = any(c for _, c in walked.values())
            if not changed and frozen:
                self._remember_clean(value)
                return value, False
            return value.model_copy(update={k: v for k, (v, _) in walked.items()}), changed
        if isinstance(value, list | tuple):
            items = [self._walk(v) for v in value]
            out_items = [v for v, _ in items]
            changed = any(c for _, c in items)
            return (out_items if isinstance(value, list) else tuple(out_items)), changed
        if isinstance(value, dict):
            pairs = {k: self._walk(v) for k, v in value.items()}
            return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
        return value, False


def _hashable(model: BaseModel) -> bool:
    try:
        hash(model)
    except TypeError:  # a frozen model with a list or dict field
        return False
    return True


def redact_data(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with ``redact`` applied to every string."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_data(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v, redact) for v in value]
    return value


def _replace(stand_in: str, match: re.Match[str]) -> str:
    """The placeholder for one match, keeping a ``pre`` group ("x-api-key: ") and the line
    count, so line numbers in redacted logs and grep results still match the file."""
    pre = match.group("pre") if "pre" in match.re.groupindex else ""
    secret = match.group(0)[len(pre or "") :]
    return (pre or "") + stand_in + "\n" * secret.count("\n")
