"""The firewall against docs/security.md's catalogue (F01-F40, SL-1, SL-4, SL-10, PI-6).

Real directories, symlinks, hard links, FIFOs and sockets; every test runs on both resolvers
(openat2 and the O_NOFOLLOW walk). Every DENY also asserts that nothing changed anywhere and
that no canary byte came back.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import socket
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from anti_sprawl.errors import RunError
from anti_sprawl.fs.firewall import DEFAULT_DENY, EditError, Firewall, FirewallError
from anti_sprawl.fs.scopes import Scope
from tests.fw_layout import (
    BACKENDS,
    CANARIES,
    Layout,
    assert_denied,
    backend_flag,
    build,
    snapshot,
)


@pytest.fixture(params=BACKENDS)
def lay(request: pytest.FixtureRequest, tmp_path: Path) -> Layout:
    return build(tmp_path, use_openat2=backend_flag(request.param))


def _no_canary(text: object) -> None:
    assert not any(c in str(text) for c in CANARIES)


# -- F01-F17: lexical attacks ----------------------------------------------------------


def test_f01_write_in_scope_baseline(lay: Layout) -> None:
    fw = lay.firewall()
    fw.write_text("src/app/x.py", "NEW\n")
    assert (lay.repo / "src/app/x.py").read_text() == "NEW\n"
    assert fw.check_write("src/app/x.py") == "src/app/x.py"
    assert fw.read_text("src/app/x.py") == "NEW\n"
    assert fw.violations == []
    lay.assert_outside_unchanged()


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside/secret", "escape_root"),  # F02
        ("/etc/passwd", "absolute"),  # F03
        ("src/app/../../../outside/secret", "escape_root"),  # F05
        ("~/.ssh/id_rsa", "bad_path"),  # F10
        ("//etc/passwd", "absolute"),  # F10: normpath keeps '//'
        ("/proc/self/root/etc/passwd", "absolute"),  # F28
        ("/proc/self/cwd/..", "absolute"),  # F28
        ("..", "escape_root"),
        ("docs/../../outside/secret", "escape_root"),
        ("docs/../.env", "bad_path"),  # no '..' at all, even when it stays inside
    ],
)
def test_lexical_escapes_are_refused(lay: Layout, path: str, reason: str) -> None:
    fw = lay.firewall()
    for call in (fw.read_text, fw.check_read, fw.list_dir):
        assert assert_denied(lay, fw, lambda c=call: c(path), reason).reason == reason
    assert_denied(lay, fw, lambda: fw.grep(".", path), reason)
    assert_denied(lay, fw, lambda: fw.write_text(path, "x"), reason)


def test_f04_absolute_path_inside_the_repo_is_refused_too(lay: Layout) -> None:
    fw = lay.firewall()
    inside = str(lay.repo / "src/app/x.py")
    assert_denied(lay, fw, lambda: fw.write_text(inside, "x"), "absolute")
    assert_denied(lay, fw, lambda: fw.read_text(inside), "absolute")


def test_f06_redundant_separators_give_the_canonical_path(lay: Layout) -> None:
    fw = lay.firewall()
    fw.write_text("src//app/./x.py", "F06\n")
    assert (lay.repo / "src/app/x.py").read_text() == "F06\n"
    assert fw.check_write("src//app/./x.py") == "src/app/x.py"
    assert fw.check_read("./src//app/x.py") == "src/app/x.py"


@pytest.mark.parametrize("path", ["src/app2/x.py", "src/app_backup/x.py", "src/app.bak"])
def test_f07_prefix_siblings_of_the_write_scope(lay: Layout, path: str) -> None:
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.write_text(path, "x"), "not_writable_scope")
    assert not (lay.repo / path).exists()


def test_f08_prefix_sibling_of_the_read_scope(lay: Layout) -> None:
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.read_text("docs-private/a.md"), "outside_scope")
    assert_denied(lay, fw, lambda: fw.list_dir("docs-private"), "outside_scope")


@pytest.mark.parametrize("path", ["src/app/x.py\x00.txt", "\x00", "src/app/\x00/x", "src/\napp"])
def test_f09_nul_and_control_bytes_are_a_clean_refusal(lay: Layout, path: str) -> None:
    fw = lay.firewall()
    violation = assert_denied(lay, fw, lambda: fw.write_text(path, "x"), "bad_path")
    assert "\x00" not in violation.path
    assert "\n" not in violation.path
    assert_denied(lay, fw, lambda: fw.read_text(path), "bad_path")


def test_f10_tilde_is_never_expanded(lay: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(lay.home))
    (lay.repo / "src/app/~").mkdir()  # even a real '~' directory inside is not a way in
    fw = lay.firewall()
    for path in ("~/.ssh/id_rsa", "~", "~root/.ssh/id_rsa"):
        assert_denied(lay, fw, lambda p=path: fw.read_text(p), "bad_path")


def test_f11_percent_encoding_is_literal(lay: Layout) -> None:
    fw = lay.firewall()
    fw.write_text("src/app/%2e%2e/%2e%2e/outside", "literal\n")
    assert (lay.repo / "src/app/%2e%2e/%2e%2e/outside").read_text() == "literal\n"
    assert fw.check_write("src/app/%2e%2e/%2e%2e/outside") == "src/app/%2e%2e/%2e%2e/outside"
    path = "src/app/%2e%2e/%2e%2e/%2e%2e/outside/secret"
    assert_denied(lay, fw, lambda: fw.read_text(path), "not_found")
    lay.assert_outside_unchanged()


@pytest.mark.parametrize(
    "path",
    ["src\\app\\..\\..\\outside\\secret", "C:\\x", "\\\\?\\C:\\x", "\\\\srv\\share", "C:foo"],
)
@pytest.mark.parametrize("op", ["read", "write", "list", "search", "check_write"])
def test_f12_windows_paths_are_refused(lay: Layout, path: str, op: str) -> None:
    fw = lay.firewall()
    calls: dict[str, Callable[[], object]] = {
        "read": lambda: fw.read_text(path),
        "write": lambda: fw.write_text(path, "x"),
        "list": lambda: fw.list_dir(path),
        "search": lambda: fw.grep("x", path),
        "check_write": lambda: fw.check_write(path),
    }
    assert_denied(lay, fw, calls[op], "bad_path")


@pytest.mark.parametrize(
    "path", ["", ".", "src/app/", "./", "src/app/new/", "src/app/pkg", "src/app/pkg/"]
)
def test_f13_directories_are_not_files(lay: Layout, path: str) -> None:
    (lay.repo / "src/app/pkg").mkdir()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.write_text(path, "x"), "not_a_file")
    assert_denied(lay, fw, lambda: fw.check_write(path), "not_a_file")
    assert_denied(lay, fw, lambda: fw.read_text(path), "not_a_file", "outside_scope")


def test_f14_overlong_paths_and_components(lay: Layout) -> None:
    fw = lay.firewall()
    long_path = "src/app/" + "/".join(["d" * 99] * 50)
    long_name = "src/app/" + "n" * 300
    assert_denied(lay, fw, lambda: fw.write_text(long_path, "x"), "name_too_long")
    assert_denied(lay, fw, lambda: fw.write_text(long_name, "x"), "name_too_long")
    assert_denied(lay, fw, lambda: fw.read_text(long_name), "name_too_long")
    multibyte = "src/app/" + "é" * 200  # 400 bytes: the limit is on bytes, not characters
    assert_denied(lay, fw, lambda: fw.write_text(multibyte, "x"), "name_too_long")
    # The longest legal name still works: the temp file name does not grow with it.
    fw.write_text("src/app/" + "m" * 255, "ok\n")
    assert (lay.repo / "src/app" / ("m" * 255)).read_text() == "ok\n"


def test_f15_fullwidth_dots_are_literal_names(lay: Layout) -> None:
    fw = lay.firewall()
    for path in ("．．／outside", "src/app/．．／．．／outside/secret", "docs/\u2025/secret"):
        assert_denied(lay, fw, lambda p=path: fw.read_text(p), "outside_scope", "not_found")
    fw.write_text("src/app/．．／x", "literal\n")
    assert (lay.repo / "src/app/．．／x").read_text() == "literal\n"
    lay.assert_outside_unchanged()


def test_f16_case_variants_are_different_paths_on_linux(lay: Layout) -> None:
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.write_text("SRC/APP/x.py", "x"), "outside_scope")
    assert not (lay.repo / "SRC").exists()


@pytest.mark.parametrize(
    "path",
    [
        ".git/hooks/pre-commit",
        ".git/config",
        ".gitmodules",
        ".anti-sprawl/plan.json",
        ".GIT/hooks/pre-commit",
        ".Git/config",
        ".ANTI-SPRAWL/plan.json",
        "src/.git/config",
        "src/app/.git/hooks/x",
    ],
)
def test_f17_internal_paths_are_denied_even_in_scope(lay: Layout, path: str) -> None:
    fw = lay.firewall(read_scope=["**"], write_scope=["**"])
    assert_denied(lay, fw, lambda: fw.write_text(path, "pwned"), "denied_internal")
    assert_denied(lay, fw, lambda: fw.check_write(path), "denied_internal")
    assert_denied(lay, fw, lambda: fw.read_text(path), "denied_internal")
    names = {e.name for e in fw.list_dir("")}
    assert not names & {".git", ".anti-sprawl", ".gitmodules", ".env"}
    assert {"src", "docs", "README.md", ".env.example"} <= names


# -- F18-F25: symlinks ----------------------------------------------------------------


def test_f18_directory_symlink_to_outside(lay: Layout) -> None:
    os.symlink(lay.outside, lay.repo / "src/app/link")
    lay.seal()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.read_text("src/app/link/secret"), "symlink_escape")
    assert_denied(lay, fw, lambda: fw.write_text("src/app/link/new", "x"), "symlink_escape")
    assert_denied(lay, fw, lambda: fw.check_write("src/app/link/secret"), "symlink_escape")


def test_f19_file_symlinks_and_chains(lay: Layout) -> None:
    docs = lay.repo / "docs"
    os.symlink("/etc/passwd", docs / "leak")
    os.symlink("../../outside/secret", docs / "rel")
    os.symlink("a2", docs / "a1")
    os.symlink("a3", docs / "a2")
    os.symlink("../../outside/secret", docs / "a3")
    os.symlink("c2", docs / "c1")
    os.symlink("../docs/c3", docs / "c2")
    os.symlink("a.md", docs / "c3")
    lay.seal()
    fw = lay.firewall()
    for path in ("docs/leak", "docs/rel", "docs/a1"):
        assert_denied(lay, fw, lambda p=path: fw.read_text(p), "symlink_escape")
    assert fw.read_text("docs/c1") == "# docs a\n"
    assert fw.check_read("docs/c1") == "docs/a.md"


@pytest.mark.parametrize("target", ["abs", "../../../outside/created", "missing.txt"])
def test_f20_dangling_symlink_is_never_created_through(lay: Layout, target: str) -> None:
    link_target = str(lay.outside / "created") if target == "abs" else target
    os.symlink(link_target, lay.repo / "src/app/new.txt")
    lay.seal()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.write_text("src/app/new.txt", "x"), "symlink_escape")
    assert_denied(lay, fw, lambda: fw.check_write("src/app/new.txt"), "symlink_escape")
    assert not (lay.outside / "created").exists()
    assert not (lay.repo / "src/app/missing.txt").exists()


def test_f21_existing_symlink_to_outside_victim(lay: Layout) -> None:
    os.symlink(lay.outside / "victim", lay.repo / "src/app/e.txt")
    lay.seal()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.write_text("src/app/e.txt", "pwned"), "symlink_escape")
    assert_denied(lay, fw, lambda: fw.edit_text("src/app/e.txt", "C", "X"), "symlink_escape")
    assert (lay.outside / "victim").read_text() == "CANARY-VICTIM\n"


def test_f22_symlink_inside_write_scope_writes_its_target(lay: Layout) -> None:
    os.symlink("real.py", lay.repo / "src/app/alias")
    fw = lay.firewall()
    assert fw.check_write("src/app/alias") == "src/app/real.py"
    fw.write_text("src/app/alias", "ALIASED = 1\n")
    assert (lay.repo / "src/app/real.py").read_text() == "ALIASED = 1\n"
    assert os.readlink(lay.repo / "src/app/alias") == "real.py"
    fw.edit_text("src/app/alias", "1", "2")
    assert (lay.repo / "src/app/real.py").read_text() == "ALIASED = 2\n"


def test_f23_write_scope_is_judged_on_the_target(lay: Layout) -> None:
    os.symlink("../../docs/a.md", lay.repo / "src/app/ro")
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.write_text("src/app/ro", "x"), "not_writable_scope")
    assert fw.read_text("src/app/ro") == "# docs a\n"
    assert fw.check_read("src/app/ro") == "docs/a.md"


def test_f24_deny_list_applies_to_the_real_path(lay: Layout) -> None:
    os.symlink("../.env", lay.repo / "docs/env")
    os.symlink("../.git/config", lay.repo / "docs/gitcfg")
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.read_text("docs/env"), "denied_secret")
    assert_denied(lay, fw, lambda: fw.read_text("docs/gitcfg"), "denied_internal")
    _no_canary(fw.grep("TOKEN", "docs"))


def test_f25_missing_parents_are_created_inside_scope_only(lay: Layout) -> None:
    fw = lay.firewall()
    assert fw.check_write("src/app/new/deep/f.py") == "src/app/new/deep/f.py"
    assert not (lay.repo / "src/app/new").exists()
    fw.write_text("src/app/new/deep/f.py", "deep\n")
    assert (lay.repo / "src/app/new/deep/f.py").read_text() == "deep\n"
    os.symlink("gone", lay.repo / "src/app/dang")
    os.symlink(lay.outside / "madedir", lay.repo / "src/app/dang2")
    lay.seal()
    for path in ("src/app/dang/deep/f.py", "src/app/dang2/deep/f.py"):
        assert_denied(lay, fw, lambda p=path: fw.write_text(p, "x"), "symlink_escape")
        assert_denied(lay, fw, lambda p=path: fw.check_write(p), "symlink_escape")
    assert not (lay.repo / "src/app/gone").exists()


def test_write_through_symlinked_directory_is_judged_on_the_real_parent(lay: Layout) -> None:
    os.symlink("../../docs", lay.repo / "src/app/docs_link")
    os.symlink("../app", lay.repo / "src/app/self")
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.write_text("src/app/docs_link/new.md", "x"))
    assert_denied(lay, fw, lambda: fw.write_text("src/app/docs_link/n/new.md", "x"))
    fw.write_text("src/app/self/via.py", "via\n")
    assert (lay.repo / "src/app/via.py").read_text() == "via\n"
    assert fw.read_text("src/app/docs_link/a.md") == "# docs a\n"


# -- F28-F31: magic links, hard links, special files, symlinked root ------------------


def test_f28_symlinks_into_proc_are_refused(lay: Layout) -> None:
    os.symlink("/proc/self/root", lay.repo / "docs/proc")
    os.symlink("../" * 30 + "proc/self/root/etc/passwd", lay.repo / "docs/deep")
    lay.seal()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.read_text("docs/proc/etc/passwd"), "symlink_escape")
    assert_denied(lay, fw, lambda: fw.read_text("docs/deep"), "symlink_escape")
    assert_denied(lay, fw, lambda: fw.list_dir("docs/proc"), "symlink_escape")


def test_f29_hard_link_to_outside_is_refused_both_ways(lay: Layout) -> None:
    os.link(lay.outside / "secret", lay.repo / "src/app/h")
    lay.seal()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.read_text("src/app/h"), "hardlink")
    assert_denied(lay, fw, lambda: fw.write_text("src/app/h", "pwned"), "hardlink")
    assert_denied(lay, fw, lambda: fw.check_write("src/app/h"), "hardlink")
    assert (lay.outside / "secret").stat().st_nlink == 2
    _no_canary(fw.grep("CANARY", "src"))


def _read_with_guard(call: Callable[[], object]) -> BaseException | None:
    """Run ``call`` in a thread so a hang fails the test instead of stalling the suite."""
    result: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            result.append(None)
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the firewall hung on a special file"
    return result[0]


def _bind_socket(path: Path) -> socket.socket:
    # AF_UNIX paths are limited to ~108 bytes: bind in a short directory, then move it in.
    short = Path(tempfile.mkdtemp(prefix="fw"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(short / "s"))
    (short / "s").rename(path)
    short.rmdir()
    return sock


def test_f30_special_files_never_hang(lay: Layout) -> None:
    os.mkfifo(lay.repo / "docs/fifo")
    os.mkfifo(lay.repo / "src/app/fifo")
    os.symlink("/dev/zero", lay.repo / "docs/z")
    sock = _bind_socket(lay.repo / "docs/sock")
    with (lay.repo / "docs/big.md").open("wb") as fh:
        fh.truncate(3 * 1024**3)  # sparse: 3 GB without the disk space
    lay.seal()
    fw = lay.firewall()
    try:
        for path, reason in [
            ("docs/fifo", "special_file"),
            ("docs/sock", "special_file"),
            ("docs/z", "symlink_escape"),
            ("docs/big.md", "too_large"),
        ]:
            exc = _read_with_guard(lambda p=path: fw.read_text(p))
            assert isinstance(exc, FirewallError)
            assert exc.violation.reason == reason
        exc = _read_with_guard(lambda: fw.write_text("src/app/fifo", "x"))
        assert isinstance(exc, FirewallError)
        assert exc.violation.reason == "special_file"
        assert _read_with_guard(lambda: fw.grep("x", "docs")) is None
        kinds = {e.name: e.kind for e in fw.list_dir("docs")}
        assert kinds["fifo"] == "other"
        assert kinds["sock"] == "other"
        assert kinds["z"] == "symlink"
    finally:
        sock.close()
    lay.assert_outside_unchanged()


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a device needs root")
def test_f30_device_node_inside_the_repo_is_not_opened(lay: Layout) -> None:
    os.mknod(lay.repo / "docs/null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.read_text("docs/null"), "special_file")


def test_f31_root_reached_through_a_symlink(lay: Layout) -> None:
    link = lay.tmp / "link-repo"
    os.symlink(lay.repo, link)
    fw = lay.firewall(root=link)
    assert fw.root == lay.repo.resolve()
    assert fw.check_read("src/app/x.py") == "src/app/x.py"
    fw.write_text("src/app/x.py", "F31\n")
    assert (lay.repo / "src/app/x.py").read_text() == "F31\n"
    assert_denied(lay, fw, lambda: fw.read_text("../outside/secret"), "escape_root")
    assert_denied(lay, fw, lambda: fw.write_text("docs/a.md", "x"), "not_writable_scope")


# -- F32-F35: listing and search ------------------------------------------------------


def test_f32_list_dir_does_not_follow_links(lay: Layout) -> None:
    os.symlink(lay.outside, lay.repo / "src/app/link")
    lay.seal()
    fw = lay.firewall()
    entries = {e.name: e for e in fw.list_dir("src/app")}
    assert entries["link"].kind == "symlink"
    assert entries["x.py"].kind == "file"
    assert entries["x.py"].size == len("print('x')\n")
    assert "secret" not in entries
    assert_denied(lay, fw, lambda: fw.list_dir("src/app/link"), "symlink_escape")


def test_list_dir_shows_only_what_scope_reaches(lay: Layout) -> None:
    fw = lay.firewall()
    assert [(e.name, e.kind) for e in fw.list_dir("")] == [("docs", "dir"), ("src", "dir")]
    assert [e.name for e in fw.list_dir(".")] == ["docs", "src"]
    assert [e.name for e in fw.list_dir("src/")] == ["app", "lib.py", "sub"]
    narrow = lay.firewall(read_scope=[], write_scope=["src/app/x.py"])
    assert [e.name for e in narrow.list_dir("src")] == ["app"]
    assert [e.name for e in narrow.list_dir("src/app")] == ["x.py"]
    assert_denied(lay, fw, lambda: fw.list_dir("src/app/x.py"), "not_a_directory")
    assert_denied(lay, fw, lambda: fw.list_dir(".git"), "denied_internal")
    assert_denied(lay, fw, lambda: fw.list_dir("docs-private"), "outside_scope")


def test_f33_search_skips_directory_symlinks(lay: Layout) -> None:
    os.symlink(lay.outside, lay.repo / "src/app/link")
    os.symlink("../../docs", lay.repo / "src/app/docs_link")
    os.symlink("../../outside/secret", lay.repo / "src/leak.py")
    lay.seal()
    fw = lay.firewall()
    matches = fw.grep(".", "src")
    paths = {m.path for m in matches}
    assert paths == {"src/app/x.py", "src/app/real.py", "src/lib.py", "src/sub/x.py"}
    _no_canary(matches)
    assert fw.grep("CANARY", "") == []
    assert_denied(lay, fw, lambda: fw.grep(".", "src/app/link"), "symlink_escape")


@pytest.mark.parametrize(("path", "reason"), [("../outside", "escape_root"), ("..", "escape_root")])
def test_f34_search_outside_the_root(lay: Layout, path: str, reason: str) -> None:
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.grep("CANARY", path), reason)


def test_f35_search_and_listing_hide_denied_files(lay: Layout) -> None:
    (lay.repo / "docs/.env").write_text("K=CANARY-ENV\n")
    (lay.repo / "docs/.env.example").write_text("K=example\n")
    (lay.repo / "docs/key.PEM").write_text("CANARY-ENV\n")
    fw = lay.firewall()
    matches = fw.grep("K=|CANARY", "docs")
    assert [(m.path, m.line) for m in matches] == [("docs/.env.example", "K=example")]
    names = [e.name for e in fw.list_dir("docs")]
    assert ".env.example" in names
    assert ".env" not in names
    assert "key.PEM" not in names
    assert_denied(lay, fw, lambda: fw.grep(".", "docs/.env"), "denied_secret")


def test_grep_details(lay: Layout) -> None:
    (lay.repo / "docs/many.md").write_text("hit\n" * 50)
    (lay.repo / "docs/bin.md").write_bytes(b"hit\x00hit\n")
    fw = lay.firewall()
    assert len(fw.grep("hit", "docs", max_matches=7)) == 7
    assert [m.line_no for m in fw.grep("hit", "docs/many.md", max_matches=3)] == [1, 2, 3]
    assert {m.path for m in fw.grep("hit")} == {"docs/many.md"}  # the binary file is skipped
    deep = lay.repo / "docs" / "/".join(["d"] * 70)
    deep.mkdir(parents=True)
    (deep / "deep.md").write_text("hit\n")
    (lay.repo / "docs" / "/".join(["d"] * 10) / "ten.md").write_text("hit\n")
    found = {m.path for m in fw.grep("hit", "docs/d")}
    assert found == {"docs/" + "d/" * 10 + "ten.md"}  # the walk stops 64 levels down
    assert_denied(lay, fw, lambda: fw.grep("(unclosed", "docs"), "bad_pattern")
    assert_denied(lay, fw, lambda: fw.grep("x", "docs/nope"), "not_found")


# -- F36-F40 ---------------------------------------------------------------------------


def test_f36_globs_are_component_wise_and_anchored(lay: Layout) -> None:
    fw = lay.firewall(read_scope=["src/*.py"], write_scope=[])
    assert fw.read_text("src/lib.py") == "LIB = 1\n"
    assert_denied(lay, fw, lambda: fw.read_text("src/sub/x.py"), "outside_scope")
    assert_denied(lay, fw, lambda: fw.read_text("/etc/x/src/a.py"), "absolute")


def test_f37_no_move_into_or_out_of_scope(lay: Layout) -> None:
    fw = lay.firewall()
    text = fw.read_text("src/app/x.py")
    assert_denied(lay, fw, lambda: fw.write_text("docs/x.py", text), "not_writable_scope")
    fw.write_text("src/app/a.md", fw.read_text("docs/a.md"))  # a copy; the source stays
    assert (lay.repo / "docs/a.md").read_text() == "# docs a\n"
    # the move tool itself: the destination outside, or the source outside (its deletion)
    assert_denied(lay, fw, lambda: fw.move("src/app/x.py", "docs/x.py"), "not_writable_scope")
    assert_denied(lay, fw, lambda: fw.move("docs/a.md", "src/app/b.md"), "not_writable_scope")
    assert_denied(lay, fw, lambda: fw.delete("docs/a.md"), "not_writable_scope")
    assert [v.op for v in fw.violations[-3:]] == ["move", "move", "delete"]


@pytest.mark.parametrize(
    ("path", "reasons"),
    [
        ("src/app", ("not_writable_scope",)),  # the directory itself is not in src/app/**
        ("src/app/..", ("bad_path",)),
        ("src", ("outside_scope",)),
    ],
)
def test_f38_the_scope_root_cannot_be_replaced(
    lay: Layout, path: str, reasons: tuple[str, ...]
) -> None:
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.write_text(path, ""), *reasons)
    wide = lay.firewall(write_scope=["src/**"])
    assert_denied(lay, wide, lambda: wide.write_text("src/app", ""), "not_a_file")
    assert (lay.repo / "src/app/x.py").exists()


@pytest.mark.parametrize(
    ("path", "reasons"),
    [
        ("src/app", ("scope_root",)),  # every file below is in scope, but it is the root
        ("src/app/", ("scope_root",)),
        ("src/app/..", ("bad_path",)),
        ("src", ("scope_root", "outside_scope", "not_writable_scope")),
        ("", ("scope_root", "not_a_file")),
        (".", ("scope_root", "not_a_file")),
    ],
)
def test_f38_the_scope_root_cannot_be_deleted_or_moved(
    lay: Layout, path: str, reasons: tuple[str, ...]
) -> None:
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.delete(path), *reasons)
    assert_denied(lay, fw, lambda: fw.move(path, "src/app/moved"), *reasons)
    wide = lay.firewall(write_scope=["src/app/", "src/lib.py"])
    assert_denied(lay, wide, lambda: wide.delete("src/app"), "scope_root")
    assert_denied(lay, wide, lambda: wide.delete("src"), "scope_root", "not_writable_scope")


def test_f39_no_operation_takes_a_boundary_argument(lay: Layout) -> None:
    fw = lay.firewall()
    names = ("read_text", "list_dir", "grep", "write_text", "edit_text", "check_read")
    for name in (*names, "delete", "move"):
        params = set(inspect.signature(getattr(fw, name)).parameters)
        assert not params & {"cwd", "root", "scope", "read_scope", "write_scope"}, name
    with pytest.raises(TypeError):
        fw.read_text("secret", root=str(lay.outside))  # type: ignore[call-arg]
    other = Firewall(lay.outside, ["**"], [])
    assert other.read_text("secret") == "CANARY-OUT\n"  # that boundary lives in another object
    assert_denied(lay, fw, lambda: fw.read_text("secret"), "outside_scope")


def test_f40_case_insensitive_directory(lay: Layout) -> None:
    cf = lay.tmp / "cf"
    cf.mkdir()
    proc = subprocess.run(["chattr", "+F", str(cf)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"chattr +F unsupported here (needs ext4 with casefold): {proc.stderr.strip()}")
    (cf / ".git").mkdir()
    (cf / ".git" / "config").write_text("[core]\n")
    (cf / ".env").write_text("CANARY-ENV\n")
    fw = Firewall(cf, ["**"], ["**"], use_openat2=lay.use_openat2)
    for path in (".GIT/config", ".Git/hooks/x", ".Env", ".ENV"):
        with pytest.raises(FirewallError):
            fw.read_text(path)
        with pytest.raises(FirewallError):
            fw.write_text(path, "x")
    assert (cf / ".git" / "config").read_text() == "[core]\n"


# -- secrets (SL-1, SL-4, SL-10) and injection (PI-6) ---------------------------------


@pytest.mark.parametrize(
    "name",
    [
        ".env",
        ".env.local",
        ".ENV",
        ".Env.Production",
        ".envrc",
        "id_rsa",
        "ID_RSA",
        "id_ed25519",
        "id_ed25519.pub",
        "server.pem",
        "CERT.PEM",
        "private.key",
        ".npmrc",
        ".NETRC",
        ".aws/credentials",
        ".AWS/Credentials",
        "terraform.tfstate",
        "prod.TFSTATE",
        "terraform.tfstate.backup",
        "sub/.env.local",
        ".env/inner.md",
    ],
)
def test_sl1_secret_names_are_denied(lay: Layout, name: str) -> None:
    path = lay.repo / "docs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("CANARY-ENV\n")
    fw = lay.firewall(read_scope=["**"], write_scope=["docs/**"])
    rel = f"docs/{name}"
    assert_denied(lay, fw, lambda: fw.read_text(rel), "denied_secret")
    assert_denied(lay, fw, lambda: fw.write_text(rel, "x"), "denied_secret")
    assert_denied(lay, fw, lambda: fw.check_read(rel), "denied_secret")
    _no_canary(fw.grep("CANARY"))
    parent, leaf = rel.rsplit("/", 1)
    if name.startswith(".env/"):  # the parent itself is a secret name
        assert_denied(lay, fw, lambda: fw.list_dir(parent), "denied_secret")
    else:
        assert leaf not in {e.name for e in fw.list_dir(parent)}


@pytest.mark.parametrize("name", [".env.example", "docs/.env.example", ".ENV.EXAMPLE"])
def test_sl1_env_example_is_allowed(lay: Layout, name: str) -> None:
    (lay.repo / name).parent.mkdir(parents=True, exist_ok=True)
    (lay.repo / name).write_text("TOKEN=changeme\n")
    fw = lay.firewall(read_scope=["**"], write_scope=[])
    assert fw.read_text(name) == "TOKEN=changeme\n"


def test_sl1_defaults_cover_the_documented_patterns() -> None:
    assert {".env*", "*.pem", "*.key", "id_rsa*", "id_ed25519*", ".npmrc", ".netrc"} <= set(
        DEFAULT_DENY
    )
    assert {".aws/credentials", "*.tfstate", ".git/", ".anti-sprawl/"} <= set(DEFAULT_DENY)


def test_custom_deny_and_allow(lay: Layout) -> None:
    (lay.repo / "docs/notes.secret").write_text("CANARY-ENV\n")
    fw = lay.firewall(deny=("*.secret",), allow=())
    assert_denied(lay, fw, lambda: fw.read_text("docs/notes.secret"), "denied_secret")
    fw2 = lay.firewall(read_scope=["**"], deny=(), allow=())
    assert fw2.read_text(".env") == "TOKEN=CANARY-ENV\n"  # deny=() really turns secrets off
    assert_denied(lay, fw2, lambda: fw2.read_text(".git/config"), "denied_internal")


def test_sl4_symlink_to_home_credentials(lay: Layout) -> None:
    os.symlink(lay.home / ".aws/credentials", lay.repo / "docs/cfg.md")
    (lay.repo / ".aws").mkdir(parents=True)
    (lay.repo / ".aws/credentials").write_text("CANARY-AWS\n")
    os.symlink("../.aws/credentials", lay.repo / "docs/cfg2.md")
    lay.seal()
    fw = lay.firewall(read_scope=["docs/**", ".aws/**"])
    assert_denied(lay, fw, lambda: fw.read_text("docs/cfg.md"), "symlink_escape")
    assert_denied(lay, fw, lambda: fw.read_text("docs/cfg2.md"), "denied_secret")
    _no_canary(fw.grep("CANARY"))


def test_sl10_hard_link_to_a_private_key(lay: Layout) -> None:
    os.link(lay.home / ".ssh/id_rsa", lay.repo / "src/app/h")
    lay.seal()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.read_text("src/app/h"), "hardlink")
    assert_denied(lay, fw, lambda: fw.write_text("src/app/h", "x"), "hardlink")


@pytest.mark.parametrize("relative", [True, False])
def test_pi6_symlink_planted_in_scope(lay: Layout, relative: bool) -> None:
    target = "../../outside/secret" if relative else str(lay.outside / "secret")
    os.symlink(target, lay.repo / "docs/s")  # what `ln -s` from a test command would leave
    lay.seal()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.read_text("docs/s"), "symlink_escape")
    _no_canary(fw.grep(".", "docs"))


# -- content rules, edits, bookkeeping -------------------------------------------------


def test_binary_and_oversize_reads(lay: Layout) -> None:
    (lay.repo / "docs/nul.md").write_bytes(b"text\x00more")
    (lay.repo / "docs/latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (lay.repo / "docs/eleven.md").write_text("0123456789\n")
    fw = lay.firewall(max_read_bytes=10)
    assert_denied(lay, fw, lambda: fw.read_text("docs/nul.md"), "binary")
    assert_denied(lay, fw, lambda: fw.read_text("docs/latin1.md"), "binary")
    assert_denied(lay, fw, lambda: fw.read_text("docs/eleven.md"), "too_large")
    assert_denied(lay, fw, lambda: fw.check_read("docs/eleven.md"), "too_large")
    assert fw.read_text("docs/a.md") == "# docs a\n"


def test_write_keeps_mode_and_bytes(lay: Layout) -> None:
    script = lay.repo / "src/app/run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    fw = lay.firewall()
    fw.write_text("src/app/run.sh", "#!/bin/sh\necho ok\r\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert script.read_bytes() == b"#!/bin/sh\necho ok\r\n"
    assert fw.read_text("src/app/run.sh") == "#!/bin/sh\necho ok\r\n"
    assert not [p for p in script.parent.iterdir() if p.name.startswith(".as-tmp")]
    assert_denied(lay, fw, lambda: fw.write_text("src/app/s.py", "\ud800"), "bad_content")


def test_edit_text(lay: Layout) -> None:
    target = lay.repo / "src/app/real.py"
    target.write_text("a = 1\nb = 1\nc = 2\n")
    fw = lay.firewall()
    fw.edit_text("src/app/real.py", "c = 2", "c = 3")
    assert target.read_text() == "a = 1\nb = 1\nc = 3\n"
    before = target.read_bytes()
    with pytest.raises(EditError, match="not found"):
        fw.edit_text("src/app/real.py", "zzz", "y")
    with pytest.raises(EditError, match="matches 2 times"):
        fw.edit_text("src/app/real.py", "= 1", "= 9")
    with pytest.raises(EditError, match="empty"):
        fw.edit_text("src/app/real.py", "", "y")
    assert target.read_bytes() == before
    assert fw.violations == []  # edit mistakes are not violations
    assert_denied(lay, fw, lambda: fw.edit_text("docs/a.md", "docs", "x"), "not_writable_scope")
    assert_denied(lay, fw, lambda: fw.edit_text("src/app/nope.py", "a", "b"), "not_found")


def test_edit_text_finds_the_old_text_once_up_to_whitespace(lay: Layout) -> None:
    """make real-model 2026-12-03 run 5, call 6: the old text quoted on one line, the file's
    body on the next; only whitespace may differ, and only one place may match."""
    target = lay.repo / "src/app/real.py"
    target.write_text("def add(a, b):\n    return a + b\n\n\ndef two():\n    return 2\n")
    fw = lay.firewall()
    note = fw.edit_text(
        "src/app/real.py", "def add(a, b): return a + b", "def add(a, b): return b + a"
    )
    assert note == "the old text matched only with other whitespace"
    assert target.read_text() == "def add(a, b): return b + a\n\n\ndef two():\n    return 2\n"
    before = target.read_bytes()
    for old in ("def add(a,b): return b + a", "return  2 + 0", "return"):  # words differ; twice
        with pytest.raises(EditError, match=r"not found|matches 2 times"):
            fw.edit_text("src/app/real.py", old, "x")
    assert target.read_bytes() == before


def test_violations_are_recorded_from_many_threads(lay: Layout) -> None:
    fw = lay.firewall()
    threads = [
        threading.Thread(target=lambda: [_swallow(fw.read_text, ".env") for _ in range(50)])
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fw.violations) == 400
    assert {(v.op, v.path, v.reason) for v in fw.violations} == {("read", ".env", "denied_secret")}


def _swallow(call: Callable[[str], object], arg: str) -> None:
    with contextlib.suppress(FirewallError):
        call(arg)


def test_violation_paths_are_printable_and_bounded(lay: Layout) -> None:
    fw = lay.firewall()
    violation = assert_denied(lay, fw, lambda: fw.read_text("a\x00b" + "c" * 5000))
    assert violation.path.isprintable()
    assert len(violation.path) < 400
    assert violation.op == "read"
    assert violation.detail
    assert_denied(lay, fw, lambda: fw.read_text(123), "bad_path")  # type: ignore[arg-type]


def test_constructor_errors_are_run_errors(lay: Layout) -> None:
    with pytest.raises(RunError, match="not a directory"):
        Firewall(lay.tmp / "missing", ["**"], [])
    with pytest.raises(RunError, match="bad scope entry"):
        Firewall(lay.repo, ["../x"], [])
    fw = lay.firewall()
    assert fw.backend == ("openat2" if lay.use_openat2 else "walk")
    assert fw.read_scope.matches("src/app/x.py")
    assert isinstance(fw.write_scope, Scope)
    fw.close()
    fw.close()  # idempotent
    with lay.firewall() as fw2:
        assert fw2.check_read("docs/a.md") == "docs/a.md"


def test_denied_reads_change_nothing_in_repo(lay: Layout) -> None:
    before = snapshot(lay.repo)
    fw = lay.firewall()
    for path in (".env", ".git/config", "README.md", "docs-private/a.md"):
        with pytest.raises(FirewallError):
            fw.read_text(path)
    assert snapshot(lay.repo) == before


def test_text_of_serves_bytes_exactly_as_read_text_serves_the_file(lay: Layout) -> None:
    """Issue 29 item 3: the start commit's view checks git's bytes with ``text_of`` instead of
    reading an exported copy; for every regular file, what it serves or refuses (and why) is
    what ``read_text`` gives for the file holding those bytes."""
    extra = {
        "src/crlf.py": b"a = 1\r\nb = 2\r\n",
        "src/mixed.py": b"a = 1\r\nb = 2\n",
        "src/nul.py": b"x\x00y",
        "src/latin.py": "caf\xe9\n".encode("latin-1"),
        "src/big.txt": b"z" * 300,
        "src/.env.local": b"TOKEN=CANARY-ENV\n",
        "src/id_rsa": b"-----BEGIN-----\n",
        "src/back\\slash.py": b"q = 1\n",
        "src/tab\tname.py": b"t = 1\n",
        "elsewhere/out.py": b"o = 1\n",
    }
    for rel, data in extra.items():
        (lay.repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (lay.repo / rel).write_bytes(data)
    files = sorted(
        p.relative_to(lay.repo).as_posix()
        for p in lay.repo.rglob("*")
        if p.is_file() and not p.is_symlink() and p.stat().st_nlink == 1
    )
    assert set(extra) <= set(files)

    def outcome(call: Callable[[], str]) -> str:
        try:
            return "text:" + call()
        except FirewallError as exc:
            return "refused:" + exc.violation.reason

    with lay.firewall(max_read_bytes=200) as fw:
        for rel in files:
            data = (lay.repo / rel).read_bytes()
            read = outcome(lambda r=rel: fw.read_text(r))
            assert outcome(lambda r=rel, d=data: fw.text_of(r, d)) == read, rel
    assert read_text_of(lay, "src/crlf.py") == "a = 1\nb = 2\n"
    assert read_text_of(lay, "src/mixed.py") == "a = 1\r\nb = 2\n"


def read_text_of(lay: Layout, rel: str) -> str:
    with lay.firewall() as fw:
        return fw.text_of(rel, (lay.repo / rel).read_bytes())
