"""The path firewall: a worker's file operations, confined to its node's scopes.

Reads are allowed in ``read_scope ∪ write_scope``, writes only in ``write_scope``; secrets,
``.git/`` and ``.anti-sprawl/`` never. Decisions are made on what the kernel opened, not on
the string asked for (``confinement``); writes go through ``scoped_write``. Scopes come only
from the constructor: no tool argument can move the boundary (docs/security.md P5, F39). Every
refusal raises ``FirewallError`` and is appended to ``violations``. The one exception is
``grant``: the run's scope-request policy (run/scope_grants.py) may add a plain file path it
has checked and recorded; nothing a model sends reaches it unchecked (docs/security.md SR-1).

One class over 300 lines: every file operation a worker has, each a few lines over
``confinement`` and ``scoped_write``; splitting the class would split the boundary it is.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import RunError
from . import safe_fs
from .confinement import Confinement, join, refusal_from_os
from .deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from .edit_match import find_edit
from .path_rules import (
    DirEntry,
    EditError,
    FirewallError,
    GrepMatch,
    Op,
    Refusal,
    Violation,
    display_path,
    split_request,
)
from .scoped_change import delete_path, move_path
from .scoped_write import plan_write, write_file
from .scopes import FileSet, Scope
from .text_fidelity import TextShape, for_model, from_model

__all__ = [
    "DEFAULT_ALLOW",
    "DEFAULT_DENY",
    "DirEntry",
    "EditError",
    "Firewall",
    "FirewallError",
    "GrepMatch",
    "Violation",
]

_MAX_LINE = 1000
_MAX_DEPTH = 64  # directory levels a search descends; bounds recursion and open fds


class Firewall:
    """Serves file operations inside ``root`` for one node; refuses and records the rest.

    ``use_openat2`` None probes the kernel; False forces the portable component walk.
    ``durable`` fsyncs every write before its rename (off only where git is the record).
    """

    def __init__(
        self,
        root: Path,
        read_scope: Sequence[str] | FileSet,
        write_scope: Sequence[str],
        *,
        deny: Sequence[str] = DEFAULT_DENY,
        allow: Sequence[str] = DEFAULT_ALLOW,
        max_read_bytes: int = 1_000_000,
        use_openat2: bool | None = None,
        durable: bool = True,
        redact: Callable[[str], str] | None = None,
    ):
        try:
            writable = Scope(write_scope)
            readable = (
                read_scope.union(writable)
                if isinstance(read_scope, FileSet)
                else Scope(read_scope).union(writable)
            )
        except ValueError as exc:
            raise RunError(f"firewall: {exc}") from exc
        self._c = Confinement(
            root,
            readable,
            writable,
            DenyRules(deny, allow),
            max_read_bytes=max_read_bytes,
            use_openat2=safe_fs.openat2_available() if use_openat2 is None else use_openat2,
            durable=durable,
        )
        self.root: Path = self._c.root
        self.read_scope: Scope = readable
        self.write_scope: Scope = writable
        self.violations: list[Violation] = []
        self._lock = threading.Lock()
        # Applied to whole file texts before they are served or split into grep lines, so a
        # multi-line secret (a key block) is caught even when only some lines are shown.
        self._redact: Callable[[str], str] = redact or str

    @property
    def backend(self) -> str:
        """The resolver in use: ``openat2`` or the ``O_NOFOLLOW`` component ``walk``."""
        return "openat2" if self._c.use_openat2 else "walk"

    def close(self) -> None:
        """Release the root directory fd (also done when the firewall is collected)."""
        self._c.close()

    def __enter__(self) -> Firewall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def grant(self, mode: str, path: str) -> None:
        """Add one file to the read (``mode`` "read") or the write scope: called only by the
        run's scope-request policy after its checks (run/scope_grants.py), never by a tool."""
        with self._lock:
            try:
                if mode == "write":
                    self.write_scope = self.write_scope.union([path])
                self.read_scope = self.read_scope.union([path])
            except ValueError as exc:
                raise RunError(f"firewall: {exc}") from exc
            self._c.read_scope, self._c.write_scope = self.read_scope, self.write_scope

    def check_read(self, path: str) -> str:
        """The canonical repo-relative path ``read_text`` would serve (content unchecked)."""
        try:
            fd, real, _ = self._c.open_file(split_request(path, want_file=True))
            os.close(fd)
            return real
        except Refusal as refusal:
            raise self._refuse("read", path, refusal) from None

    def check_write(self, path: str) -> str:
        """The canonical repo-relative path ``write_text`` would write; nothing is changed."""
        try:
            return plan_write(self._c, split_request(path, want_file=True))
        except Refusal as refusal:
            raise self._refuse("write", path, refusal) from None

    def read_text(self, path: str) -> str:
        """The UTF-8 text of an in-scope regular file (capped, no binaries).

        A file whose line breaks are all CRLF is returned with ``\\n`` (``text_fidelity``).
        """
        try:
            return self._served(path)
        except Refusal as refusal:
            raise self._refuse("read", path, refusal) from None

    def current_text(self, path: str) -> str | None:
        """The text of the file a write to ``path`` would replace; None when there is none
        or it cannot be read. Never a violation: the write that follows states any refusal."""
        try:
            return self._served(path)
        except Refusal:
            return None

    def _served(self, path: str) -> str:
        """What ``read_text`` serves for ``path``; raises the ``Refusal`` unrecorded."""
        return self._redact(for_model(self._c.read(split_request(path, want_file=True))))

    def text_of(self, path: str, data: bytes) -> str:
        """What ``read_text(path)`` serves when ``path`` is a regular, singly linked file
        holding ``data``: the same path checks (request, deny rules, scope), cap, binary check
        and CRLF handling, without opening anything. For file contents read from git rather
        than a directory (the start commit's view, context/start_view.py)."""
        try:
            parts = split_request(path, want_file=True)
            self._c.require("/".join(parts), write=False)
            return self._redact(for_model(self._c.decode(data)))
        except Refusal as refusal:
            raise self._refuse("read", path, refusal) from None

    def write_text(self, path: str, content: str, *, append: bool = False) -> str:
        """Create, replace or (``append``) extend an in-scope file; parents made in scope.

        An existing file keeps its mode, its CRLF line endings and, on a whole rewrite, its
        missing final newline; a binary or non-UTF-8 file is refused. Returns a note on what
        was kept ('' when nothing).
        """
        try:
            parts = split_request(path, want_file=True)
            if not isinstance(content, str):
                raise Refusal("bad_content", "content must be text")
            shape, existing = self._existing(parts, append=append)
            text = from_model(content, shape, whole=not append)
            self._write(parts, existing + text if append else text)
            return shape.kept(whole=not append) if shape else ""
        except Refusal as refusal:
            raise self._refuse("write", path, refusal) from None

    def edit_text(self, path: str, old: str, new: str) -> str:
        """Replace the one occurrence of ``old`` with ``new`` (exact, or else up to whitespace:
        fs/edit_match.py); EditError otherwise."""
        try:
            parts = split_request(path, want_file=True)
            plan_write(self._c, parts)
            stored = self._c.read(parts)
        except Refusal as refusal:
            raise self._refuse("write", path, refusal) from None
        text = for_model(stored)
        if not old:
            raise EditError(f"{display_path(path)}: the old text is empty; nothing was changed")
        found = find_edit(text, old)
        if isinstance(found, int):
            where = "not found" if found == 0 else f"matches {found} times"
            raise EditError(f"{display_path(path)}: old text {where}; nothing was changed")
        start, end, loose = found
        shape = TextShape.of(stored)
        try:
            self._write(parts, from_model(text[:start] + new + text[end:], shape, whole=False))
        except Refusal as refusal:
            raise self._refuse("write", path, refusal) from None
        notes = ["the old text matched only with other whitespace"] if loose else []
        return "; ".join(n for n in [*notes, shape.kept(whole=False)] if n)

    def delete(self, path: str) -> list[str]:
        """Delete an in-scope file, symlink or directory (every file below it writable).

        Returns the canonical paths removed; see ``scoped_change`` for the rules.
        """
        try:
            return delete_path(self._c, _change_parts(path))
        except Refusal as refusal:
            raise self._refuse("delete", path, refusal) from None
        except OSError as exc:
            raise self._refuse("delete", path, refusal_from_os(exc)) from None

    def move(self, source: str, destination: str) -> list[tuple[str, str]]:
        """Rename ``source`` to ``destination`` (which must not exist), both in the write scope.

        Returns the (old, new) canonical path of every file moved.
        """
        shown = f"{display_path(source)} -> {display_path(destination)}"
        try:
            return move_path(self._c, _change_parts(source), _change_parts(destination))
        except Refusal as refusal:
            raise self._refuse("move", shown, refusal) from None
        except OSError as exc:
            raise self._refuse("move", shown, refusal_from_os(exc)) from None

    def list_dir(self, path: str = "") -> list[DirEntry]:
        """Entries of a directory in (or leading into) scope; denied names are hidden."""
        try:
            fd, real = self._c.open_dir(split_request(path, want_file=False))
            try:
                return self._c.entries(fd, real)
            finally:
                os.close(fd)
        except Refusal as refusal:
            raise self._refuse("list", path, refusal) from None
        except OSError as exc:
            raise self._refuse("list", path, refusal_from_os(exc)) from None

    def grep(self, pattern: str, path: str = "", *, max_matches: int = 200) -> list[GrepMatch]:
        """Lines matching regex ``pattern`` in readable files at or below ``path``.

        Symlinks met while walking are skipped, never followed; each file is re-validated
        on its real path; binary, oversize and denied files are silently left out, and the
        walk stops 64 directory levels down.
        """
        try:
            try:
                regex = re.compile(pattern)
            except (re.error, TypeError, RecursionError, OverflowError) as exc:
                raise Refusal("bad_pattern", f"invalid regular expression: {exc}") from None
            parts = split_request(path, want_file=False)
            out: list[GrepMatch] = []
            if parts and not self._is_dir(parts):
                fd, real, st = self._c.open_file(parts)
                try:
                    text = self._redact(self._c.read_fd(fd, st))
                    _grep_text(text, real, regex, out, max_matches)
                finally:
                    os.close(fd)
                return out
            fd, real = self._c.open_dir(parts)
            try:
                self._grep_dir(fd, real, regex, out, max_matches)
            finally:
                os.close(fd)
            return out
        except Refusal as refusal:
            raise self._refuse("search", path, refusal) from None
        except OSError as exc:
            raise self._refuse("search", path, refusal_from_os(exc)) from None

    # -- internals ---------------------------------------------------------------------

    def _refuse(self, op: Op, path: object, refusal: Refusal) -> FirewallError:
        violation = Violation(
            op=op, path=display_path(path), reason=refusal.reason, detail=refusal.detail
        )
        with self._lock:
            self.violations.append(violation)
        return FirewallError(violation)

    def _existing(self, parts: Sequence[str], *, append: bool) -> tuple[TextShape | None, str]:
        """The shape and (for an append) the text of the file a write would replace."""
        try:
            stored = self._c.read(parts)
        except Refusal as refusal:
            if refusal.reason == "binary":
                raise
            if refusal.reason == "too_large" and append:
                raise Refusal("too_large", f"cannot append: {refusal.detail}") from None
            # Missing (a new file), or a refusal the write itself will state.
            return None, ""
        return TextShape.of(stored), stored if append else ""

    def _write(self, parts: Sequence[str], text: str) -> None:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise Refusal("bad_content", "content is not encodable as UTF-8 text") from None
        write_file(self._c, parts, data)

    def _is_dir(self, parts: Sequence[str]) -> bool:
        fd = self._c.open(parts)
        try:
            return stat.S_ISDIR(os.fstat(fd).st_mode)
        finally:
            os.close(fd)

    def _grep_dir(
        self,
        dir_fd: int,
        real: str,
        regex: re.Pattern[str],
        out: list[GrepMatch],
        cap: int,
        depth: int = 0,
    ) -> None:
        for entry in self._c.entries(dir_fd, real):
            if len(out) >= cap:
                return
            if entry.kind == "dir" and depth < _MAX_DEPTH:
                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            elif entry.kind == "file":
                flags = safe_fs.OPEN_PATH | os.O_NOFOLLOW
            else:
                continue  # symlinks are never followed while walking (P12); depth capped
            try:
                fd = os.open(entry.name, flags, dir_fd=dir_fd)
            except OSError:
                continue  # vanished, or swapped for a symlink since the listing
            try:
                if entry.kind == "dir":
                    rel = self._c.real(fd)
                    if rel == join(real, entry.name):
                        self._c.require_dir(rel, write=False)
                        self._grep_dir(fd, rel, regex, out, cap, depth + 1)
                else:
                    rel, st = self._c.check_file_fd(fd, write=False)
                    if st.st_size <= self._c.max_read_bytes:
                        text = self._redact(self._c.read_fd(fd, st))
                        _grep_text(text, rel, regex, out, cap)
            except (Refusal, OSError):
                continue  # binaries, oversize, hard links, races: not searched, not shown
            finally:
                os.close(fd)


def _change_parts(path: object) -> tuple[str, ...]:
    """A delete or move target: a file or directory, never the repository root."""
    if isinstance(path, str) and path.endswith("/"):
        path = path.rstrip("/")  # "src/old/" names the directory src/old
    parts = split_request(path, want_file=False)
    if not parts:
        raise Refusal("scope_root", "the repository root is never deleted or moved")
    return parts


def _grep_text(text: str, rel: str, regex: re.Pattern[str], out: list[GrepMatch], cap: int) -> None:
    for no, line in enumerate(text.splitlines(), 1):
        if len(out) >= cap:
            return
        if regex.search(line):
            out.append(GrepMatch(path=rel, line_no=no, line=line[:_MAX_LINE]))
