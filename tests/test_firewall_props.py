"""Property tests: generated hostile paths never get past the firewall.

The layout is docs/security.md's plus a zoo of symlinks (to outside, to secrets, into /proc,
dangling, looping, up the tree) and a hard link to an outside file. For every generated
(operation, path): outside and home are unchanged, nothing outside the write scope changed,
no canary comes back, and whatever was allowed names a canonical path inside its scope.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anti_sprawl.fs.deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from anti_sprawl.fs.firewall import EditError, Firewall, FirewallError
from anti_sprawl.fs.scopes import Scope
from tests.fw_layout import (
    BACKENDS,
    CANARIES,
    READ_SCOPE,
    WRITE_SCOPE,
    Layout,
    backend_flag,
    build,
    snapshot,
)

OPS = ["read", "check_read", "list", "grep", "write", "check_write", "edit"]
NAMES = [
    *["src", "app", "docs", "x.py", "a.md", "real.py", "lib.py", "sub", "new", "README.md"],
    *["link", "leak", "alias", "ro", "h", "dang", "fifo", "env", "proc", "home", "up", "loop"],
    *["outside", "secret", "victim", ".env", ".env.example", ".git", "config", "id_rsa"],
    *[".ssh", "etc", "passwd", "self", "root", "docs-private"],
]
ODD = [
    *["..", ".", "", "~", "%2e", "%2e%2e", "．．", "／", "\u2024", "\u2025", "\\", "\x00", "C:"],
    *["\n", "a" * 300, "b" * 255, ".ENV", "SRC", ".anti-sprawl", ".gitmodules", ".aws"],
    "credentials",
]
DENY = DenyRules(DEFAULT_DENY, DEFAULT_ALLOW)
READABLE = Scope(READ_SCOPE).union(WRITE_SCOPE)
WRITABLE = Scope(WRITE_SCOPE)


def _zoo(lay: Layout) -> None:
    repo, app = lay.repo, lay.repo / "src/app"
    os.symlink(lay.outside, app / "link")
    os.symlink("../../../outside/secret", app / "leak")
    os.symlink("x.py", app / "alias")
    os.symlink("../../docs/a.md", app / "ro")
    os.symlink("../../../outside/created", app / "dang")
    os.symlink("..", app / "up")
    os.symlink("loop", app / "loop")
    os.link(lay.outside / "victim", app / "h")
    os.mkfifo(app / "fifo")
    os.symlink("../.env", repo / "docs/env")
    os.symlink("/proc/self/root", repo / "docs/proc")
    os.symlink(lay.home / ".ssh", repo / "docs/home")
    os.symlink("../outside", repo / "outside")
    lay.seal()


def _frozen(lay: Layout) -> dict[str, object]:
    """The repo entries that no operation may change: everything outside the write scope."""
    return {k: v for k, v in snapshot(lay.repo).items() if not WRITABLE.matches(k)}


def _paths(lay: Layout) -> st.SearchStrategy[str]:
    """Mostly plausible paths through the zoo, salted with hostile prefixes and segments."""
    hostile_prefix = st.sampled_from(
        [
            *["/", "//", "~/", "../", "/proc/self/root/", "/proc/self/cwd/", "C:\\"],
            *["\\\\srv\\", f"{lay.repo}/", f"{lay.outside}/", f"{lay.tmp}/link-repo/"],
        ]
    )
    plain = st.sampled_from(["", "", "./", "src/", "src/app/", "src/app/", "docs/"])
    start = st.one_of(plain, plain, plain, hostile_prefix)
    name = st.sampled_from(NAMES)
    segment = st.one_of(*[name] * 8, st.sampled_from(ODD), st.text(max_size=4))
    return st.builds(
        lambda pre, segs, sep, trail: pre + sep.join(segs) + trail,
        start,
        st.lists(segment, max_size=5),
        st.sampled_from(["/"] * 12 + ["//", "/./", "\\"]),
        st.sampled_from(["", "", "", "/"]),
    )


def _check_allowed(lay: Layout, fw: Firewall, op: str, path: str, result: object, n: int) -> None:
    assert not any(c in repr(result) for c in CANARIES), (op, path)
    if op in ("read", "check_read"):
        canonical = fw.check_read(path)
        assert READABLE.matches(canonical)
        assert DENY.reason(canonical) is None
        if op == "read":
            assert result == (lay.repo / canonical).read_text()
    elif op in ("write", "check_write", "edit"):
        canonical = fw.check_write(path)
        assert WRITABLE.matches(canonical)
        assert DENY.reason(canonical) is None
        if op == "write":
            assert (lay.repo / canonical).read_text() == f"W{n}\n"
    elif op == "grep":
        assert isinstance(result, list)
        for match in result:
            assert READABLE.matches(match.path)
            assert DENY.reason(match.path) is None
            lines = (lay.repo / match.path).read_text().splitlines()
            assert lines[match.line_no - 1] == match.line
    else:
        assert isinstance(result, list)
        for entry in result:
            assert DENY.reason(entry.name) is None, entry


@pytest.mark.parametrize("backend", BACKENDS)
def test_hostile_paths_never_escape(tmp_path: Path, backend: str) -> None:
    lay = build(tmp_path, use_openat2=backend_flag(backend))
    _zoo(lay)
    os.symlink(lay.repo, tmp_path / "link-repo")
    frozen = _frozen(lay)
    fw = lay.firewall(durable=False)
    counter = iter(range(10**9))

    @settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(op=st.sampled_from(OPS), path=_paths(lay))
    def run(op: str, path: str) -> None:
        n = next(counter)
        calls = {
            "read": lambda: fw.read_text(path),
            "check_read": lambda: fw.check_read(path),
            "list": lambda: fw.list_dir(path),
            "grep": lambda: fw.grep("CANARY|.", path),
            "write": lambda: fw.write_text(path, f"W{n}\n"),
            "check_write": lambda: fw.check_write(path),
            "edit": lambda: fw.edit_text(path, "x", "y"),
        }
        refusal: FirewallError | None = None
        try:
            result = calls[op]()
        except FirewallError as exc:
            refusal = exc
        except EditError:
            return
        if refusal is None:
            _check_allowed(lay, fw, op, path, result, n)
        else:  # a refusal names the path printably and never quotes a canary
            assert not any(c in str(refusal) for c in CANARIES)
            assert refusal.violation.path.isprintable()
        lay.assert_outside_unchanged()
        assert _frozen(lay) == frozen

    run()


HOSTILE = st.one_of(
    st.builds(
        lambda a, bad, b: a + bad + b,
        st.text(max_size=15),
        st.sampled_from(["\x00", "\\"]),
        st.text(max_size=15),
    ),
    st.builds(
        lambda pre, rest: pre + rest,
        st.sampled_from(["/", "//", "~", "~/", "/proc/self/root/"]),
        st.text(max_size=20),
    ),
    st.builds(
        lambda segs, i: "/".join([*segs[:i], "..", *segs[i:]]),
        st.lists(st.text(alphabet="ab.~%", max_size=3), max_size=4),
        st.integers(0, 4),
    ),
)


@given(path=HOSTILE)
def test_lexically_hostile_paths_are_refused_before_the_filesystem(path: str) -> None:
    # Even with root "/" and scope "**" nothing of these reaches the filesystem.
    with (
        Firewall(Path("/"), ["**"], [], use_openat2=False) as fw,
        pytest.raises(FirewallError) as info,
    ):
        fw.read_text(path)
    assert info.value.violation.reason in ("bad_path", "absolute", "escape_root")
