"""The orchestrator-side pre-commit scan: secrets a node's staged change adds, read from blobs.

Repository hooks never run (``git.cmd``); this scan is ours. It reads the staged blobs
themselves with ``git cat-file --batch``, not ``git diff`` text, because a diff of a file with
a NUL byte says only "Binary files differ" and would hide whatever the file adds. Each changed
blob is decoded leniently (UTF-8 with replacement, and again with NUL bytes dropped, which
turns UTF-16 text into ASCII), and a secret counts when it is in the new blob but not in the
old one: a node that edits next to a secret already committed is not blamed for it.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..redact import Finding, Redactor
from .workspace import Workspace

__all__ = ["staged_secrets"]

_NULL_SHA = "0" * 40


def _staged_blobs(ws: Workspace) -> list[tuple[str, str, str]]:
    """``(path, old_blob, new_blob)`` of every staged addition or modification."""
    ws.git(["add", "-A", *(["--sparse"] if ws.sparse is not None else [])])
    raw = ws.git(
        ["diff", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", "--no-ext-diff"]
    ).stdout
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
        old = old_sha if old_mode != "160000" else _NULL_SHA
        out.append((path.decode("utf-8", "surrogateescape"), old, new_sha))
    return out


def _read_blobs(ws: Workspace, shas: list[str]) -> dict[str, bytes]:
    wanted = [s for s in dict.fromkeys(shas) if s != _NULL_SHA]
    if not wanted:
        return {}
    data = ws.git(["cat-file", "--batch"], input_bytes="".join(f"{s}\n" for s in wanted).encode())
    return dict(_parse_batch(data.stdout))


def _parse_batch(data: bytes) -> Iterator[tuple[str, bytes]]:
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


def staged_secrets(ws: Workspace, redactor: Redactor) -> str:
    """``"<kind> in <path>"`` for the first secret the staged change adds, else ``""``."""
    staged = _staged_blobs(ws)
    blobs = _read_blobs(ws, [sha for _, old, new in staged for sha in (old, new)])
    for path, old, new in staged:
        added = _findings(redactor, blobs.get(new, b"")) - _findings(redactor, blobs.get(old, b""))
        if added:
            kind = sorted(added)[0].kind
            return f"{kind} in {path}"
    return ""
