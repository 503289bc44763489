"""Memory facts for worker prompts, and the four checks they pass before loading.

A memory is retrievable data with a lifecycle risk (seed: context engineering, memory). Before
a fact reaches a prompt: its source must be a known label, it must not have expired, its scope
globs must overlap the node's scopes, and a ``model_inferred`` fact is shown as a hypothesis,
never as a fact. ``load_memory`` reads the facts a user keeps in ``.anti-sprawl/memory.yaml``.

That file is the user's, never repository content: a tracked (or symlinked) ``.anti-sprawl``
refuses the whole run (``git.layout``), and the file itself is opened without following a
link. Nothing in the tool writes memory, so a ``source`` label is only a claim: every fact
reaches a prompt as untrusted data (``MEMORY_TRUST``), whatever label it carries.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import UsageError
from ..fs.safe_fs import read_capped
from ..fs.scopes import may_overlap

__all__ = [
    "KNOWN_SOURCES",
    "MEMORY_TRUST",
    "MemoryFact",
    "MemoryScreen",
    "load_memory",
    "screen_memory",
]

KNOWN_SOURCES = ("user_stated", "system_record", "model_inferred")
# Labels are claims made by whoever wrote the file; they rank facts, they never grant trust.
MEMORY_TRUST: Final = "untrusted"
MAX_MEMORY_BYTES = 1024 * 1024
MemoryDrop = Literal["unknown_source", "expired", "out_of_scope"]


class MemoryFact(BaseModel):
    """One remembered fact: its text, provenance label, the paths it is about, and its expiry.

    ``source`` is kept as a plain string so records with an unknown label can be screened
    (and dropped) instead of failing to load; accepted labels are ``KNOWN_SOURCES``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = Field(min_length=1)
    source: str = Field(description="user_stated | system_record | model_inferred")
    scope: list[str] = Field(
        default_factory=list,
        description="Repo-relative globs the fact is about; an empty scope matches nothing.",
    )
    expires: datetime = Field(description="After this instant the fact is not loaded.")


class MemoryScreen(BaseModel):
    """The outcome of screening: facts, hypotheses, and what was refused and why."""

    model_config = ConfigDict(frozen=True)

    facts: list[MemoryFact] = Field(default_factory=list)
    hypotheses: list[MemoryFact] = Field(default_factory=list)
    dropped: list[tuple[MemoryFact, MemoryDrop]] = Field(default_factory=list)


def _aware(moment: datetime) -> datetime:
    # A naive timestamp is taken as UTC rather than local time, so screening is host-independent.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _in_scope(fact: MemoryFact, node_scope: Sequence[str]) -> bool:
    return any(may_overlap(mine, theirs) for mine in fact.scope for theirs in node_scope)


def screen_memory(
    facts: Iterable[MemoryFact], *, node_scope: Sequence[str], now: datetime
) -> MemoryScreen:
    """Apply the four checks in order (source, expiry, scope, inferred-as-hypothesis)."""
    facts_out: list[MemoryFact] = []
    hypotheses: list[MemoryFact] = []
    dropped: list[tuple[MemoryFact, MemoryDrop]] = []
    moment = _aware(now)
    for fact in facts:
        if fact.source not in KNOWN_SOURCES:
            dropped.append((fact, "unknown_source"))
        elif _aware(fact.expires) <= moment:
            dropped.append((fact, "expired"))
        elif not _in_scope(fact, node_scope):
            dropped.append((fact, "out_of_scope"))
        elif fact.source == "model_inferred":
            hypotheses.append(fact)
        else:
            facts_out.append(fact)
    return MemoryScreen(facts=facts_out, hypotheses=hypotheses, dropped=dropped)


def load_memory(path: Path) -> list[MemoryFact]:
    """Facts from a YAML file (``facts: [...]`` or a bare list); none when it does not exist."""
    try:
        # O_NOFOLLOW: a link planted in place of the file is refused, never read through.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UsageError(f"cannot read memory file {path}: {exc.strerror}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"memory file {path} is not a regular file")
        raw = read_capped(fd, MAX_MEMORY_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_MEMORY_BYTES:
        raise UsageError(f"memory file {path} is larger than {MAX_MEMORY_BYTES} bytes")
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read memory file {path}: {exc}") from exc
    items = data.get("facts") if isinstance(data, dict) else data
    if items is None:
        return []
    if not isinstance(items, list):
        raise UsageError(f"memory file {path}: expected a list of facts")
    try:
        return [MemoryFact.model_validate(item) for item in items]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise UsageError(f"memory file {path}: {where}: {first['msg']}") from exc
