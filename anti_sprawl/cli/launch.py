"""What ``execute`` was started with, kept in the journal so ``resume RUN`` goes on the same way.

``record`` turns the options of ``execute`` (provider, model, base URL, script, prices,
sandbox options, caps, jobs, timeouts, executor, ... every option except the plan, the
repository and output switches) into plain JSON for ``RunState.launch``. No option holds a key
(keys come from the environment only); string values pass the redactor anyway, and a URL
loses any ``user:password@`` part. Generic on purpose: an option added to both commands is
recorded and reused with no change here.

``reuse`` fills every option the user did not give ``resume`` (Click's parameter source is
DEFAULT) from that record; given ones override. ``endpoint_notes`` says when the provider,
model or server differs from the run's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import typer

from ..providers.prices import format_usd
from ..redact import Redactor, env_secrets
from ..run.journal import RunState
from .options import ExecutorChoice, SandboxChoice
from .scope_requests import ScopeRequestsChoice

__all__ = ["endpoint_notes", "record", "reuse", "session_caps"]

# Where the run is, what it runs and how the command prints: never carried over.
NOT_RECORDED = frozenset(
    {"ctx", "plan_file", "repo", "run_id", "as_json", "dry_run", "branch", "base", "otel"}
    | {"plan_sha256", "sarif", "junit"}  # one command's checks and files (cli/ci.py)
)
# The run keeps its own caps (a resume may have raised them): only a flag or session_caps
# changes them.
NOT_REUSED = frozenset({"max_tokens", "max_cost"})
_PATHS = frozenset({"script", "prices"})
_PATH_LISTS = frozenset({"sandbox_allow"})
_ENUMS: Mapping[str, type[Enum]] = {
    "sandbox": SandboxChoice,
    "executor": ExecutorChoice,
    "scope_requests": ScopeRequestsChoice,
}
_ENDPOINT = ("provider", "base_url", "model")
_ENDPOINT_FLAGS = frozenset({"provider", "base_url", "script"})


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _plain(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, Path):
        return redactor(str(value.absolute()))
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_plain(v, redactor) for v in value]
    if isinstance(value, str):
        return redactor(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return redactor(str(value))


def record(given: Mapping[str, Any], **resolved: Any) -> dict[str, Any]:
    """The options of one execute/resume as JSON; ``resolved`` adds what the flags left to
    the environment (the provider's name, its server)."""
    redactor = Redactor(env_secrets(os.environ))
    out = {
        name: _plain(value, redactor) for name, value in given.items() if name not in NOT_RECORDED
    }
    out.update({k: _plain(v, redactor) for k, v in resolved.items() if v is not None})
    if isinstance(out.get("base_url"), str):
        out["base_url"] = _without_userinfo(out["base_url"])
    return out


def _typed(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name in _PATHS:
        return Path(value)
    if name in _PATH_LISTS:
        return [Path(v) for v in value]
    if name in _ENUMS:
        return _ENUMS[name](value)
    return value


def _given(ctx: typer.Context, name: str) -> bool:
    """Given on the command line or by its environment variable (Click's parameter source)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def reuse(
    ctx: typer.Context, recorded: Mapping[str, Any], given: Mapping[str, Any]
) -> dict[str, Any]:
    """``given`` (a command's arguments) with every option the user left out taken from the
    run's record."""
    out = dict(given)
    skip = set(NOT_RECORDED | NOT_REUSED)
    # A provider, server or script given names a new endpoint: none of the run's is kept
    # (a recorded provider beside a new --script would contradict it), nor its model when
    # the provider may have changed.
    if any(_given(ctx, name) for name in _ENDPOINT_FLAGS):
        skip |= _ENDPOINT_FLAGS
        if _given(ctx, "provider") or _given(ctx, "script"):
            skip.add("model")
    for name, value in recorded.items():
        if name in out and name not in skip and not _given(ctx, name):
            out[name] = _typed(name, value)
    return out


def session_caps(
    state: RunState, max_tokens: int | None, max_cost: float | None
) -> tuple[int | None, float | None, list[str]]:
    """The caps of a resume: the flags; after a stop at a cap no flag raises, the same
    allowance again (what the run was first given), with a line saying so; else None (the
    run keeps its own)."""
    notes = []
    stopped = state.stopped_by or ""
    if max_tokens is None and state.max_tokens and "--max-tokens" in stopped:
        allowance = int(state.launch.get("max_tokens") or state.max_tokens)
        max_tokens = state.tokens.total + allowance
        notes.append(
            f"the run stopped at its token cap; this session may spend {allowance:,} more "
            f"tokens (--max-tokens {max_tokens:,} in all; pass --max-tokens to choose)"
        )
    if max_cost is None and state.max_cost is not None and "--max-cost" in stopped:
        more = float(state.launch.get("max_cost") or state.max_cost)
        max_cost = state.cost_usd + more
        notes.append(
            f"the run stopped at its cost cap; this session may spend {format_usd(more)} more "
            f"(--max-cost {format_usd(max_cost)} in all; pass --max-cost to choose)"
        )
    return max_tokens, max_cost, notes


def endpoint_notes(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """One line per endpoint setting (provider, server, model) this session changes."""
    notes = []
    for name in _ENDPOINT:
        before, after = recorded.get(name), now.get(name)
        if before is not None and after is not None and before != after:
            flag = name.replace("_", "-")
            notes.append(f"this session uses --{flag} {after} (the run was started with {before})")
    return notes
