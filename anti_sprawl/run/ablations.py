"""Evaluation ablations: one policy object that says what each switched-off boundary changes.

Each ablation switches one boundary off, to measure what it buys (``anti-sprawl eval --ablate``;
never for real work). The node asks this policy instead of testing names itself:

- ``firewall``: tool scope checks and the post-node audit off (``.git`` stays protected: the
  firewall's fixed rules still hold), so the worker may read and write anywhere.
- ``clean-slate``: each worker also gets the transcripts of the nodes that ran before it (the
  polluted context a shared chat history would give it).
- ``scoping``: the read scope is the whole repository, packed to the context window, and the
  first prompt reads eagerly instead of leanly.
- ``scope-requests``: every ``request_scope`` is refused, whatever ``--scope-requests`` says
  (the plan's scopes are all a node gets, as before scope requests: run/scope_grants.py).
- ``integration``: no integration check on the branch tip (run/integration.py), so a semantic
  conflict between unordered nodes lands unnoticed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from ..errors import UsageError
from ..plan.model import TaskNode
from .scope_grants import ScopeRequests

__all__ = ["ABLATIONS", "AblationName", "Ablations", "NodeScopes"]

AblationName = Literal["firewall", "clean-slate", "scoping", "scope-requests", "integration"]
ABLATIONS: tuple[AblationName, ...] = get_args(AblationName)
_EVERYTHING = ["**"]


@dataclass(frozen=True)
class NodeScopes:
    """What a node's firewall enforces: read and write scopes, and the deny rules (None: the
    default secret and internal names)."""

    read: list[str]
    write: list[str]
    deny: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Ablations:
    """The ablations switched on for a run (none for real work); plain, frozen data."""

    names: frozenset[AblationName] = frozenset()

    @classmethod
    def of(cls, names: Iterable[str]) -> Ablations:
        """The policy for ``names``; an unknown name is a UsageError naming the known ones."""
        chosen: set[AblationName] = set()
        for name in names:
            if name not in ABLATIONS:
                raise UsageError(f"unknown ablation {name!r}: use {', '.join(ABLATIONS)}")
            chosen.add(name)
        return cls(frozenset(chosen))

    @property
    def firewall(self) -> bool:
        return "firewall" in self.names

    @property
    def clean_slate(self) -> bool:
        return "clean-slate" in self.names

    @property
    def scoping(self) -> bool:
        return "scoping" in self.names

    def scope_requests(self, chosen: ScopeRequests) -> ScopeRequests:
        """The run's ``--scope-requests``, or ``never`` with the scope-requests ablation."""
        return "never" if "scope-requests" in self.names else chosen

    @property
    def integration(self) -> bool:
        """The integration check switched off (run/integration.py)."""
        return "integration" in self.names

    def scopes(self, node: TaskNode) -> NodeScopes:
        """The scopes the node's firewall enforces."""
        if self.firewall:
            return NodeScopes(list(_EVERYTHING), list(_EVERYTHING), ())
        read = list(_EVERYTHING) if self.scoping else list(node.read_scope)
        return NodeScopes(read, list(node.write_scope))

    def audit_scope(self, node: TaskNode) -> list[str]:
        """What the post-node audit keeps: the write scope, or everything without a firewall."""
        return list(_EVERYTHING) if self.firewall else list(node.write_scope)

    def prompt_node(self, node: TaskNode, scopes: NodeScopes) -> TaskNode:
        """The node as the first prompt describes it (with the widened read scope if any)."""
        return node.model_copy(update={"read_scope": scopes.read}) if self.scoping else node

    def prompt_budget(self, lean: int, context_window: int) -> int:
        """Tokens the first prompt may fill: the lean target, or the whole window."""
        return context_window if self.scoping else lean

    @property
    def eager_reads(self) -> bool:
        """Whether the first prompt reads whole files up front instead of leanly."""
        return self.scoping
