"""One scope request as the record keeps it, and the lexical checks a requested path must pass.

A worker may ask for one more file (``request_scope``, agent/tools.py); whether it gets it is
the run's policy (run/scope_grants.py). What is decided here is only what a request may name
at all: one plain repo-relative file path, never a glob or a directory (either would widen the
scope past the file asked for), never ``..``, an absolute path, an internal file (``.git/``,
``.anti-sprawl/``, ``.gitmodules``) or a secret by the firewall's own deny rules
(docs/security.md P5, SR-1). The firewall still judges every later operation on the real path
the kernel opened, so a grant of a symlink's name never reaches the symlink's target.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from .deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from .scopes import entry_problem, is_glob, normalize_entry

__all__ = ["ScopeGrant", "ScopeMode", "requested_path"]

ScopeMode = Literal["read", "write"]
_DENY = DenyRules(DEFAULT_DENY, DEFAULT_ALLOW)


class ScopeGrant(BaseModel):
    """One requested path and what became of it: the journal's ``scope_grants`` entries, the
    manifests', the PR body's and the trailers' source."""

    model_config = ConfigDict(extra="forbid")

    mode: ScopeMode
    path: str
    reason: str = ""  # the worker's words (untrusted text: redacted, escaped where shown)
    granted: bool
    why: str  # one line: what allowed it, or why not (naming a conflicting node)
    already: bool = False  # in scope before it was asked for (answered, never recorded)


def requested_path(raw: str) -> tuple[str, str | None]:
    """``(canonical path, problem)``: the path a request names, and why it can never be
    granted (None when it may be)."""
    if not isinstance(raw, str):
        return "", "paths must be strings"
    shown = raw.strip()
    if shown.startswith("/"):
        return shown, "absolute paths are never granted; name a repo-relative file"
    if is_glob(shown):
        return shown, "globs are never granted; name each file"
    if shown.endswith("/"):
        return shown, "directories are never granted; name each file"
    problem = entry_problem(shown)
    if problem:
        return shown, problem
    path = normalize_entry(shown)
    reason = _DENY.reason(path)
    if reason == "denied_internal":
        return path, "an internal file (.git/, .anti-sprawl/, .gitmodules) is never in scope"
    if reason == "denied_secret":
        return path, "a secret file is never in scope"
    return path, None
