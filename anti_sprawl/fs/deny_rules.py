"""Which names are never served: the secret catalogue and the internal directories.

The deny rules are gitignore-style patterns matched case-insensitively on every leading part
of a path (docs/security.md P6), with ``.git/``, ``.anti-sprawl/`` and ``.gitmodules`` denied
whatever the configuration says (P7). The firewall, the repository listing, the audit, plan
validation and the command sandbox all ask the same ``DenyRules``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import pathspec

from .path_rules import Reason
from .scopes import ALWAYS_DENIED_DIRS

__all__ = ["DEFAULT_ALLOW", "DEFAULT_DENY", "DenyRules"]

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


@lru_cache(maxsize=64)
def _matcher(patterns: tuple[str, ...]) -> _Matcher:
    """The compiled matcher of ``patterns`` (it never changes once built: shared)."""
    return _Matcher(patterns)


class DenyRules:
    """Names never served: secrets (unless allowed) and the internal directories."""

    def __init__(self, deny: Sequence[str], allow: Sequence[str]):
        # Every node builds firewalls and an audit from the same lists: compile them once.
        self._deny = _matcher(tuple(deny))
        self._allow = _matcher(tuple(allow))
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
