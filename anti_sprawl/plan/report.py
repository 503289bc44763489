"""What validation reports: one ``Problem`` per finding, gathered in a ``Report``.

Its own module so the checks in ``validate``, ``repo_checks`` and ``overlap`` share the types
without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from .model import Plan

__all__ = ["Problem", "Report", "problem"]


class Problem(BaseModel):
    """One validation finding."""

    code: str
    message: str
    tasks: list[str] = Field(default_factory=list)
    paths: list[str] = Field(default_factory=list)


class Report(BaseModel):
    """The outcome of ``validate``: ``valid`` is False when there is any error."""

    valid: bool
    errors: list[Problem] = Field(default_factory=list)
    warnings: list[Problem] = Field(default_factory=list)
    plan: Plan | None = Field(default=None, exclude=True)


def problem(
    code: str, message: str, tasks: Sequence[str] = (), paths: Sequence[str] = ()
) -> Problem:
    """A ``Problem`` naming ``tasks`` and ``paths`` (any sequence; stored as lists)."""
    return Problem(code=code, message=message, tasks=list(tasks), paths=list(paths))
