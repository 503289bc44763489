"""What a requested path may look like, which names are never served, and how refusals read.

The lexical gate runs before the filesystem is touched: it refuses absolute, home-relative,
Windows-style, NUL-bearing and ``..`` paths outright and never rewrites a path (no ``~``
expansion, no URL decoding, no Unicode normalization: docs/security.md F10-F15). The deny rules are
gitignore-style patterns matched case-insensitively on every leading part of a path (P6), with
``.git/``, ``.anti-sprawl/`` and ``.gitmodules`` denied whatever the configuration says (P7).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal

import pathspec
from pydantic import BaseModel, ConfigDict

from ..errors import ToolError
from .scopes import ALWAYS_DENIED_DIRS, MAX_COMPONENT, MAX_PATH

__all__ = [
    "DEFAULT_ALLOW",
    "DEFAULT_DENY",
    "DenyRules",
    "DirEntry",
    "EditError",
    "FirewallError",
    "GrepMatch",
    "Op",
    "Reason",
    "Refusal",
    "Violation",
    "display_path",
    "split_request",
]

Op = Literal["read", "write", "delete", "move", "list", "search", "command", "audit"]
Reason = Literal[
    "absolute",
    "escape_root",
    "outside_scope",
    "not_writable_scope",
    "denied_secret",
    "denied_internal",
    "symlink_escape",
    "hardlink",
    "special_file",
    "too_large",
    "binary",
    "not_found",
    "not_a_file",
    "not_a_directory",
    "bad_path",
    "name_too_long",
    "bad_pattern",
    "bad_content",
    "race",
    "io_error",
    "symlink_path",
    "scope_root",
    "exists",
]

# The name half of the secret catalogue (redact.SECRET_SHAPES is the content half), shared by
# the firewall, the repository map, the audit, plan validation and the command sandbox, which
# masks these names even inside the trees it binds. Matched case-insensitively at any depth.
DEFAULT_DENY: tuple[str, ...] = (
    # environment files and private keys (PEM, OpenSSH, PKCS#12, PGP, PuTTY, Java, KeePass)
    ".env*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.asc",
    "*.gpg",
    "*.ppk",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".ssh/",
    ".gnupg/",
    ".password-store/",
    # credentials of package registries, forges, databases and shells
    ".npmrc",
    ".netrc",
    "_netrc",
    ".pypirc",
    ".pgpass",
    ".my.cnf",
    ".git-credentials",
    "git/credentials",
    "gh/hosts.yml",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".docker/config.json",
    ".dockercfg",
    ".htpasswd",
    "credentials.json",
    ".credentials.json",
    ".codex/auth.json",
    ".*_history",
    ".histfile",
    # cloud, cluster and infrastructure credentials
    ".aws/credentials",
    ".s3cfg",
    ".boto",
    "application_default_credentials.json",
    "access_tokens.db",
    "credentials.db",
    "accessTokens.json",
    "msal_token_cache.*",
    ".kube/config",
    "kubeconfig",
    ".vault-token",
    "credentials.tfrc.json",
    "*.tfvars",
    "*.tfstate",
    "*.tfstate.*",
    # the tool's own state and git's: never served, whatever the configuration says
    *(f"{name}/" for name in ALWAYS_DENIED_DIRS),
)
DEFAULT_ALLOW: tuple[str, ...] = (".env.example",)

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DISPLAY_MAX = 300


class DirEntry(BaseModel):
    """One ``list_dir`` entry, described without following symlinks."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["file", "dir", "symlink", "other"]
    size: int


class GrepMatch(BaseModel):
    """One matching line: canonical path, 1-based line number, the line (truncated)."""

    model_config = ConfigDict(frozen=True)

    path: str
    line_no: int
    line: str


class Violation(BaseModel):
    """One refused operation: what was asked, and a short reason code for why not."""

    model_config = ConfigDict(frozen=True)

    op: Op
    path: str
    reason: str
    detail: str = ""


class FirewallError(ToolError):
    """An operation the firewall refused; ``violation`` says which and why."""

    def __init__(self, violation: Violation):
        text = f"{violation.op} {violation.path!r} refused: {violation.reason}"
        super().__init__(f"{text} ({violation.detail})" if violation.detail else text)
        self.violation = violation


class EditError(ToolError):
    """``edit_text`` found its old text zero or several times; the file was not changed."""


class Refusal(Exception):
    """Internal: a refusal before the public method knows the operation and the request."""

    def __init__(self, reason: Reason, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason: Reason = reason
        self.detail = detail


def display_path(path: object) -> str:
    """A printable, bounded form of a requested path for logs and violations."""
    text = path if isinstance(path, str) else repr(path)
    if not text.isprintable():
        text = repr(text)[1:-1]
    return text if len(text) <= _DISPLAY_MAX else text[:_DISPLAY_MAX] + "..."


def split_request(path: object, *, want_file: bool) -> tuple[str, ...]:
    """The components of a requested repo-relative path, or a ``Refusal``.

    ``want_file`` refuses the root itself and a trailing ``/`` (they name directories).
    """
    if not isinstance(path, str):
        raise Refusal("bad_path", "the path must be a string")
    _refuse_characters(path)
    parts = _bounded_parts(path)
    if ".." in parts:
        raise _dotdot_refusal(parts)
    if want_file and (not parts or path.endswith("/")):
        raise Refusal("not_a_file", "the path names a directory, not a file")
    return parts


def _refuse_characters(path: str) -> None:
    """Refuse the characters and prefixes a repo-relative POSIX path never has."""
    if "\x00" in path:
        raise Refusal("bad_path", "NUL byte in path")
    if _CONTROL.search(path):
        raise Refusal("bad_path", "control character in path")
    if "\\" in path:
        raise Refusal("bad_path", "backslash in path (use POSIX '/' separators)")
    if path.startswith("/"):
        raise Refusal("absolute", "absolute paths are refused; use a repo-relative path")
    if _DRIVE.match(path):
        raise Refusal("bad_path", "drive letter in path")
    if path.startswith("~"):
        raise Refusal("bad_path", "'~' is never expanded; use a repo-relative path")


def _bounded_parts(path: str) -> tuple[str, ...]:
    """The non-empty, non-``.`` components, refused when the path or one is too long."""
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError:
        raise Refusal("bad_path", "path is not encodable as a file name") from None
    if len(raw) > MAX_PATH:
        raise Refusal("name_too_long", f"path longer than {MAX_PATH} bytes")
    parts = tuple(p for p in path.split("/") if p not in ("", "."))
    if any(len(os.fsencode(p)) > MAX_COMPONENT for p in parts):
        raise Refusal("name_too_long", f"path component longer than {MAX_COMPONENT} bytes")
    return parts


def _dotdot_refusal(parts: tuple[str, ...]) -> Refusal:
    """Why a path with ``..`` is refused: leaving the workspace, or not being canonical."""
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 1
        if depth < 0:
            return Refusal("escape_root", "'..' leads outside the workspace")
    return Refusal("bad_path", "'..' segments are refused; use the canonical path")


class _Matcher:
    """gitignore-style patterns matched as one combined regex (pathspec tries each in turn:
    a thousand times slower on the sandbox's walk of a worktree)."""

    def __init__(self, patterns: Sequence[str]):
        lines = []
        for pattern in patterns:
            low = pattern.lower()
            # gitignore anchors a pattern with an inner '/' at the root; ours hold at any depth.
            inner = low.rstrip("/")
            if "/" in inner and not inner.startswith(("/", "**/")):
                low = "**/" + low
            lines.append(low)
        self._spec: pathspec.PathSpec[Any] = pathspec.PathSpec.from_lines("gitignore", lines)
        sources: list[str] = []
        simple = True
        for p in self._spec.patterns:
            regex = getattr(p, "regex", None)
            if regex is None:
                continue  # blank line or comment
            source = str(regex.pattern)
            simple = simple and getattr(p, "include", False) is True and "(?P<" not in source
            sources.append(f"(?:{source})")
        self._regex: re.Pattern[str] | None = None
        if simple:
            # Every pattern holds at any depth: factor the shared "any parent" prefix out,
            # so the engine backtracks over the parents once, not once per pattern.
            anywhere = "(?:^(?:.+/)?"
            if sources and all(src.startswith(anywhere) for src in sources):
                bodies = "|".join(f"(?:{src[len(anywhere) :]}" for src in sources)
                self._regex = re.compile(f"^(?:.+/)?(?:{bodies})")
            else:
                self._regex = re.compile("|".join(sources) or r"(?!)")

    def match(self, path: str) -> bool:
        if self._regex is not None:
            return self._regex.match(path) is not None
        return self._spec.match_file(path)


class DenyRules:
    """Names never served: secrets (unless allowed) and the internal directories."""

    def __init__(self, deny: Sequence[str], allow: Sequence[str]):
        self._deny = _Matcher(deny)
        self._allow = _Matcher(allow)
        # Large repositories list tens of thousands of paths, each probed once per leading
        # directory: cache the probes (directories repeat) and enough whole answers.
        self.reason = lru_cache(maxsize=1 << 16)(self._reason)
        self._denied = lru_cache(maxsize=1 << 16)(self._denied_probe)

    def entry_reason(self, rel: str, is_dir: bool) -> Reason | None:
        """Like ``reason`` for a walk that already checked every parent of ``rel``."""
        parts = rel.lower().rsplit("/", 1)
        name = parts[-1]
        if name in ALWAYS_DENIED_DIRS or name == ".gitmodules":
            return "denied_internal"
        probe = rel.lower() + ("/" if is_dir else "")
        if self._deny.match(probe) and not self._allow.match(probe):
            return "denied_secret"
        return None

    def _reason(self, rel: str, is_dir: bool = False) -> Reason | None:
        """``denied_internal``/``denied_secret`` for a canonical relative path, else None."""
        if not rel:
            return None
        parts = rel.lower().split("/")
        # .gitmodules steers the git commands the orchestrator itself runs (F17).
        if any(p in ALWAYS_DENIED_DIRS for p in parts) or parts[-1] == ".gitmodules":
            return "denied_internal"
        # Check every leading part, so a denied directory name hides all below it and an
        # allowed name inside a denied directory stays denied.
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            probes = [prefix + "/"] if i < len(parts) or is_dir else [prefix]
            if any(self._denied(probe) for probe in probes):
                return "denied_secret"
        return None

    def _denied_probe(self, probe: str) -> bool:
        return self._deny.match(probe) and not self._allow.match(probe)
