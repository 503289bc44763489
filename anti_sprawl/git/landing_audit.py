"""The central re-audit of a node commit that came back from a remote worker.

A worker runs the same firewall, audit and secret scan as a local node, but its machine is
not the run's: what it returns is checked again here, assuming it was tampered with, before
anything can land (docs/security.md, "Remote nodes"). The bundle's pack is indexed into the
user's repository by ``git index-pack --strict``: git's object checks (fsck) and a check that
every object it names is there, under no ref and never onto a branch. (A ``git fetch`` of the
bundle into a ref did the same in three git processes, fetch, ``index-pack`` and a
connectivity ``rev-list``, plus a temporary file, and git 2.39 runs its ``index-pack`` without
``--strict`` whatever ``fetch.fsckObjects`` says: a commit with a malformed date was accepted.)
It is refused unless:

- the bundle holds one ref and needs nothing but the node's base;
- the commit is exactly one commit whose only parent is that base;
- every path it adds, edits, deletes, renames or re-modes lies in the node's write scope and
  is neither internal (``.git``, ``.anti-sprawl``, ``.gitmodules``) nor a secret name, with no
  nested repository and no symlink pointing out of the write scope;
- the secret scan of its blobs (``secret_scan.py``) finds nothing new.

An accepted commit is then rebuilt here with a message the central process writes (node name,
redacted summary, trailers): of the worker's commit only its audited tree is kept, so no text
of the worker's choosing reaches the branch, and no trailer can claim another node is done.
The rebuilt commit is held by a quarantine ref (``refs/anti-sprawl/quarantine/...``) until it
lands.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from ..errors import RunError
from ..fs.deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from ..fs.scopes import Scope
from ..redact import Redactor
from .cmd import GitError, run_git
from .secret_scan import commit_secrets
from .transport import BUNDLE_REF, parse_header
from .workspace import (
    FACT_ARGS,
    ChangeFacts,
    Trailers,
    change_between,
    compose_message,
    parse_facts,
)

__all__ = [
    "QUARANTINE_PREFIX",
    "Received",
    "ResultRefused",
    "clear_quarantine",
    "rebuild",
    "receive_checked",
]

QUARANTINE_PREFIX = "refs/anti-sprawl/quarantine"
_OBJECT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # SHA-1 or SHA-256
_SYMLINK = "120000"
_GITLINK = "160000"


class ResultRefused(RunError):
    """What a worker returned does not pass the central re-audit; nothing of it lands."""


def _out(repo: Path, args: list[str], stdin: bytes | None = None) -> bytes:
    return run_git(args, repo, input_bytes=stdin).stdout


def _quarantine(run_id: str, task_id: str) -> str:
    return f"{QUARANTINE_PREFIX}/{run_id}/{task_id}"


class Received(NamedTuple):
    """A remote node's commit that passed the re-audit: its id, its tree, what it changes."""

    commit: str
    tree: str
    change: ChangeFacts


def receive_checked(
    repo: Path,
    bundle: bytes,
    *,
    base: str,
    write_scope: Sequence[str],
    redactor: Redactor,
) -> Received:
    """Index ``bundle``'s pack and check its commit (refused, or what came), in three git
    processes: ``index-pack --strict``, one ``git log`` of the commit and its diff, one blob
    batch for the secret scan. No ref names it before the rebuild (``rebuild``)."""
    header = parse_header(bundle)
    if list(header.refs) != [BUNDLE_REF]:
        raise ResultRefused(f"the result bundle must hold one ref, not {sorted(header.refs)}")
    if set(header.prerequisites) - {base}:
        raise ResultRefused("the result bundle builds on commits other than the node's base")
    sha = header.refs[BUNDLE_REF]
    if not _OBJECT_ID.match(sha):
        raise ResultRefused(f"the result bundle's ref names {sha[:80]!r}, not an object id")
    # The pack is what follows the bundle's header; --fix-thin completes its deltas against the
    # base's objects, --strict checks every object and that every object it names exists.
    index = ["index-pack", "--stdin", "--fix-thin", "--strict"]
    try:
        run_git(index, repo, input_bytes=bundle[header.header_size :])
    except GitError as exc:
        raise ResultRefused(f"the result bundle does not unpack cleanly: {exc}") from exc
    # One read of the received commit: its id, its parents, its tree and (a one-parent
    # commit's diff being against that parent) what it changes over the base.
    fmt = ["log", "-1", "--no-walk", "--no-show-signature", "--format=%H%x00%P%x00%T"]
    try:
        out = _out(repo, [*fmt, *FACT_ARGS, f"{sha}^{{commit}}", "--"])
    except GitError as exc:
        raise ResultRefused(f"the result bundle does not hold its commit: {exc}") from exc
    commit, parents, tree, rest = [*out.split(b"\0", 3), b"", b"", b""][:4]
    parent_ids = parents.decode().split()
    read = parse_facts(rest) if parent_ids == [base] else None
    change = check(
        repo,
        commit.decode(),
        base=base,
        write_scope=write_scope,
        redactor=redactor,
        parents=parent_ids,
        change=read,
    )
    return Received(commit.decode(), tree.decode(), change)


def check(
    repo: Path,
    commit: str,
    *,
    base: str,
    write_scope: Sequence[str],
    redactor: Redactor,
    parents: list[str] | None = None,
    change: ChangeFacts | None = None,
) -> ChangeFacts:
    """ResultRefused unless ``commit`` is one in-scope, secret-free commit on ``base``; what
    it changes (one ``git diff``: the record's numbers and diff come from it too).
    ``parents`` (and ``change``, what it changes over ``base``) when the caller read them."""
    if parents is None:
        parents = _out(repo, ["rev-list", "--parents", "-n", "1", commit]).decode().split()[1:]
    if parents != [base]:
        raise ResultRefused(
            f"the result commit's parents are {[p[:12] for p in parents]}, "
            f"not the node's base {base[:12]}"
        )
    if change is None:
        change = change_between(repo, base, commit)
    _check_entries(repo, change.raw, Scope(write_scope))
    leaked = commit_secrets(repo, base, commit, redactor, raw=change.raw)
    if leaked:
        raise ResultRefused(f"the result adds what looks like a secret ({leaked})")
    return change


def _check_entries(repo: Path, raw: bytes, scope: Scope) -> None:
    """ResultRefused for the first changed path of ``raw`` (``--raw -z`` records) outside the
    scope, internal or secret-named, a nested repository or an escaping symlink."""
    rules = DenyRules(DEFAULT_DENY, DEFAULT_ALLOW)
    fields = raw.split(b"\0")
    for meta, name in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.decode("ascii", "replace").lstrip(":").split()
        if len(parts) < 5:
            continue
        old_mode, new_mode, _, new_sha, status = parts[:5]
        path = name.decode("utf-8", "surrogateescape")
        if rules.reason(path) or not scope.matches(path):
            raise ResultRefused(f"the result changes {path!r}, outside the node's write scope")
        if _GITLINK in (old_mode, new_mode):
            raise ResultRefused(f"the result adds or changes a nested repository at {path!r}")
        if new_mode == _SYMLINK and not status.startswith("D"):
            target = _out(repo, ["cat-file", "blob", new_sha]).decode("utf-8", "surrogateescape")
            if _escapes(path, target, scope):
                raise ResultRefused(f"the result's symlink {path!r} points out of scope")


def _escapes(path: str, target: str, scope: Scope) -> bool:
    if posixpath.isabs(target) or "\0" in target:
        return True
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    return joined == ".." or joined.startswith("../") or not scope.matches(joined)


def rebuild(
    repo: Path,
    commit: str,
    base: str,
    message: str,
    trailers: Trailers,
    *,
    run_id: str,
    task_id: str,
    author: tuple[str, str] | None = None,
    tree: str | None = None,
) -> str:
    """The audited tree of ``commit`` (``tree``, when the caller read it) as a new commit on
    ``base`` with our own message, authored by ``author`` (the user) and committed by the tool,
    as a local node's is."""
    if tree is None:
        tree = _out(repo, ["rev-parse", "--verify", f"{commit}^{{tree}}"]).decode().strip()
    text = compose_message(message, trailers).encode("utf-8")
    argv = ["commit-tree", tree, "-p", base, "-F", "-"]
    made = run_git(argv, repo, input_bytes=text, author=(*author, "") if author else None)
    new = made.stdout.decode().strip()
    # Held by the quarantine ref until it lands: a gc cannot take it meanwhile.
    run_git(["update-ref", _quarantine(run_id, task_id), new], repo)
    return new


def clear_quarantine(repo: Path, run_id: str, task_id: str | None = None) -> None:
    """Drop the quarantine ref of one node (or of every node of the run)."""
    if task_id:
        run_git(["update-ref", "-d", _quarantine(run_id, task_id)], repo, check=False)
        return
    prefix = f"{QUARANTINE_PREFIX}/{run_id}/"
    out = _out(repo, ["for-each-ref", "--format=%(refname)", QUARANTINE_PREFIX]).decode()
    for ref in out.split():
        if ref.startswith(prefix):
            run_git(["update-ref", "-d", ref], repo, check=False)
