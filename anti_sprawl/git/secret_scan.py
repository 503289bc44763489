"""The orchestrator-side pre-commit scan: secrets a node's staged change adds, read from blobs.

Repository hooks never run (``git.cmd``); this scan is ours. It reads the staged blobs
themselves with ``git cat-file --batch``, not ``git diff`` text, because a diff of a file with
a NUL byte says only "Binary files differ" and would hide whatever the file adds. Each changed
blob is decoded leniently (UTF-8 with replacement, and again with NUL bytes dropped, which
turns UTF-16 text into ASCII), and a secret counts when it is in the new blob but not in the
old one: a node that edits next to a secret already committed is not blamed for it.

A secret can also travel in a name: every path component of an added entry (renames are a
delete and an add here) is scanned too, except the directories the old tree already had, and a
symlink's target is its blob (docs/security.md P19). The finding names the path redacted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ..redact import Finding, Redactor
from .cmd import run_git
from .workspace import ChangeFacts, Trailers, Workspace, compose_message

__all__ = ["commit_secrets", "message_secret", "parse_batch", "staged_secrets"]

_NULL_SHA = "0" * 40  # stands for "no old blob" (any object format's null id reads as one)


def _staged_blobs(ws: Workspace) -> list[tuple[str, str, str]]:
    """``(path, old_blob, new_blob)`` of every staged addition or modification."""
    ws.git(["add", "-A", *(["--sparse"] if ws.sparse is not None else [])])
    raw = ws.git(
        ["diff", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", "--no-ext-diff"]
    ).stdout
    return _added_blobs(raw)


def _added_blobs(raw: bytes) -> list[tuple[str, str, str]]:
    """``(path, old_blob, new_blob)`` from ``--raw -z`` output, deletions and gitlinks left out."""
    fields = raw.split(b"\0")
    out: list[tuple[str, str, str]] = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.decode("ascii", "replace").lstrip(":").split()
        if len(parts) < 5:
            continue
        old_mode, new_mode, old_sha, new_sha, status = parts[:5]
        # D: nothing added; 160000: a submodule commit, not content.
        if status.startswith("D") or new_mode == "160000":
            continue
        null = old_mode == "160000" or not old_sha.strip("0")  # the null id, SHA-1 or SHA-256
        old = _NULL_SHA if null else old_sha
        out.append((path.decode("utf-8", "surrogateescape"), old, new_sha))
    return out


def _read_blobs(git: Callable[[list[str], bytes], bytes], shas: list[str]) -> dict[str, bytes]:
    wanted = [s for s in dict.fromkeys(shas) if s != _NULL_SHA]
    if not wanted:
        return {}
    data = git(["cat-file", "--batch"], "".join(f"{s}\n" for s in wanted).encode())
    return dict(parse_batch(data))


def parse_batch(data: bytes) -> Iterator[tuple[str, bytes]]:
    """``<sha> <type> <size>\\n<content>\\n`` records of ``git cat-file --batch``."""
    pos = 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        header = data[pos:end].decode("ascii", "replace").split()
        pos = end + 1
        if len(header) < 3 or header[1] == "missing":
            continue
        size = int(header[2])
        yield header[0], data[pos : pos + size]
        pos += size + 1


def _findings(redactor: Redactor, blob: bytes) -> set[Finding]:
    text = blob.decode("utf-8", "replace")
    found = set(redactor.findings(text))
    if "\0" in text:
        found |= set(redactor.findings(text.replace("\0", "")))
    return found


def _name_findings(redactor: Redactor, path: str) -> set[Finding]:
    found = set(redactor.findings(path))
    for part in path.split("/"):
        found |= set(redactor.findings(part))
    return found


def _added_name(
    git: Callable[[list[str], bytes], bytes], tree: str, redactor: Redactor, path: str
) -> set[Finding]:
    """Secrets in the name of the added ``path``, minus those of directories ``tree`` has."""
    found = _name_findings(redactor, path)
    parts = path.split("/")
    for depth in range(1, len(parts)):
        if not found:
            break
        prefix = "/".join(parts[:depth])
        if git(["ls-tree", "-z", "--name-only", tree, "--", prefix], b""):
            found -= _name_findings(redactor, prefix)
    return found


def staged_secrets(ws: Workspace, redactor: Redactor, staged: ChangeFacts | None = None) -> str:
    """``"<kind> in <path>"`` for the first secret the staged change adds, else ``""``;
    ``staged`` is what ``workspace.stage`` just staged (else this stages and lists it)."""

    def git(args: list[str], stdin: bytes) -> bytes:
        return ws.git(args, input_bytes=stdin).stdout

    blobs = _staged_blobs(ws) if staged is None else _added_blobs(staged.raw)
    return _first_added(git, "HEAD", blobs, redactor)


def commit_secrets(
    repo: Path, base: str, commit: str, redactor: Redactor, raw: bytes | None = None
) -> str:
    """Like ``staged_secrets``, for what ``commit`` adds over ``base`` in ``repo`` (the central
    re-audit of a commit a remote worker made: landing_audit.py); ``raw`` is that change's
    ``--raw -z --no-abbrev`` records when the caller already read them."""

    def git(args: list[str], stdin: bytes) -> bytes:
        return run_git(args, repo, input_bytes=stdin).stdout

    if raw is None:
        args = ["diff-tree", "-r", "--raw", "-z", "--no-renames", "--no-abbrev", base, commit]
        raw = git(args, b"")
    return _first_added(git, base, _added_blobs(raw), redactor)


def _first_added(
    git: Callable[[list[str], bytes], bytes],
    tree: str,
    staged: list[tuple[str, str, str]],
    redactor: Redactor,
) -> str:
    blobs = _read_blobs(git, [sha for _, old, new in staged for sha in (old, new)])
    for path, old, new in staged:
        named = _added_name(git, tree, redactor, path) if old == _NULL_SHA else set()
        if named:
            return f"{sorted(named)[0].kind} in the name {redactor(path)}"
        added = _findings(redactor, blobs.get(new, b"")) - _findings(redactor, blobs.get(old, b""))
        if added:
            kind = sorted(added)[0].kind
            return f"{kind} in {redactor(path)}"
    return ""


def message_secret(
    redactor: Redactor, message: str, trailers: Trailers, author: tuple[str, str] | None
) -> str:
    """The kind of a secret in a commit's metadata (its message with trailers, its author),
    else ``""``: a task id or run id is planned text too, and trailers are not redacted."""
    text = compose_message(message, trailers) + "\n".join(author or ())
    found = sorted(redactor.findings(text))
    return found[0].kind if found else ""
