"""delete and move through the firewall: the catalogue's layout, real symlinks, both resolvers.

Every refusal is checked with ``assert_denied``: recorded, no canary in the message, and no
entry changed anywhere (the repository, the outside directory, the fake home).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fw_layout import BACKENDS, Layout, assert_denied, backend_flag, build


@pytest.fixture(params=BACKENDS)
def lay(request: pytest.FixtureRequest, tmp_path: Path) -> Layout:
    return build(tmp_path, use_openat2=backend_flag(request.param))


def _tree(lay: Layout, *files: str) -> None:
    for rel in files:
        path = lay.repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{rel}\n")


# -- delete ----------------------------------------------------------------------------


def test_delete_a_file_in_scope(lay: Layout) -> None:
    fw = lay.firewall()
    assert fw.delete("src/app/x.py") == ["src/app/x.py"]
    assert not (lay.repo / "src/app/x.py").exists()
    assert fw.violations == []
    lay.assert_outside_unchanged()


def test_delete_a_directory_whose_files_are_all_in_scope(lay: Layout) -> None:
    _tree(lay, "src/app/old/a.py", "src/app/old/deep/b.py")
    (lay.repo / "src/app/old/empty").mkdir()
    fw = lay.firewall()
    removed = fw.delete("src/app/old/")
    assert sorted(removed) == ["src/app/old/a.py", "src/app/old/deep/b.py"]
    assert not (lay.repo / "src/app/old").exists()
    assert (lay.repo / "src/app/x.py").exists()


@pytest.mark.parametrize(
    ("path", "reasons"),
    [
        ("src/lib.py", ("not_writable_scope",)),
        ("README.md", ("outside_scope",)),
        ("../outside/secret", ("escape_root",)),
        ("/etc/passwd", ("absolute",)),
        (".git/config", ("denied_internal",)),
        (".git", ("denied_internal",)),
        (".env", ("denied_secret",)),
        ("src/app/missing.py", ("not_found",)),
    ],
)
def test_delete_refusals(lay: Layout, path: str, reasons: tuple[str, ...]) -> None:
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.delete(path), *reasons)


def test_delete_denied_even_when_the_scope_says_everything(lay: Layout) -> None:
    fw = lay.firewall(write_scope=["**"])
    for path in (".git", ".git/config", ".anti-sprawl", ".env", ".gitmodules"):
        assert_denied(lay, fw, lambda p=path: fw.delete(p), "denied_internal", "denied_secret")


def test_delete_a_directory_holding_an_out_of_scope_file_removes_nothing(lay: Layout) -> None:
    _tree(lay, "src/app/mixed/a.py", "src/app/mixed/b.py")
    fw = lay.firewall(write_scope=["src/app/mixed/a.py", "src/app/x.py"])
    violation = assert_denied(lay, fw, lambda: fw.delete("src/app/mixed"))
    assert violation.reason in ("not_writable_scope", "outside_scope")
    assert "src/app/mixed/b.py" in violation.detail


def test_delete_a_directory_holding_a_secret_removes_nothing(lay: Layout) -> None:
    _tree(lay, "src/app/conf/a.py", "src/app/conf/.env.local")
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.delete("src/app/conf"), "denied_secret")


def test_delete_never_goes_through_a_symlinked_directory(lay: Layout) -> None:
    os.symlink("../sub", lay.repo / "src/app/via")  # leads out of the write scope
    os.symlink("../app", lay.repo / "src/app/self")  # leads back into it: still refused
    os.symlink(str(lay.outside), lay.repo / "src/app/out")
    lay.seal()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.delete("src/app/via/x.py"), "symlink_path", "outside_scope")
    assert_denied(lay, fw, lambda: fw.delete("src/app/self/x.py"), "symlink_path")
    assert_denied(lay, fw, lambda: fw.delete("src/app/out/secret"), "symlink_escape", "escape_root")


def test_delete_of_a_symlink_removes_the_link_not_its_target(lay: Layout) -> None:
    os.symlink(str(lay.outside / "victim"), lay.repo / "src/app/link")
    os.symlink(str(lay.outside), lay.repo / "src/app/dirlink")
    _tree(lay, "src/app/tree/a.py")
    os.symlink(str(lay.outside), lay.repo / "src/app/tree/out")
    lay.seal()
    fw = lay.firewall()
    assert fw.delete("src/app/link") == ["src/app/link"]
    assert fw.delete("src/app/dirlink") == ["src/app/dirlink"]
    assert sorted(fw.delete("src/app/tree")) == ["src/app/tree/a.py", "src/app/tree/out"]
    assert not os.path.lexists(lay.repo / "src/app/link")
    assert not os.path.lexists(lay.repo / "src/app/tree")
    lay.assert_outside_unchanged()


# -- move ------------------------------------------------------------------------------


def test_move_a_file_keeps_its_bytes_and_mode(lay: Layout) -> None:
    target = lay.repo / "src/app/x.py"
    target.chmod(0o755)
    before = target.read_bytes()
    fw = lay.firewall()
    assert fw.move("src/app/x.py", "src/app/new/deep/y.py") == [
        ("src/app/x.py", "src/app/new/deep/y.py")
    ]
    moved = lay.repo / "src/app/new/deep/y.py"
    assert moved.read_bytes() == before
    assert moved.stat().st_mode & 0o777 == 0o755
    assert not target.exists()


def test_move_a_directory(lay: Layout) -> None:
    _tree(lay, "src/app/old/a.py", "src/app/old/deep/b.py")
    fw = lay.firewall()
    moved = fw.move("src/app/old", "src/app/new")
    assert sorted(moved) == [
        ("src/app/old/a.py", "src/app/new/a.py"),
        ("src/app/old/deep/b.py", "src/app/new/deep/b.py"),
    ]
    assert (lay.repo / "src/app/new/deep/b.py").read_text() == "src/app/old/deep/b.py\n"
    assert not (lay.repo / "src/app/old").exists()


@pytest.mark.parametrize(
    ("src", "dst", "reasons"),
    [
        ("src/app/x.py", "src/lib2.py", ("not_writable_scope",)),
        ("src/app/x.py", "docs/x.py", ("not_writable_scope",)),
        ("src/lib.py", "src/app/lib.py", ("not_writable_scope",)),
        ("src/app/x.py", ".git/hooks/pre-commit", ("denied_internal",)),
        ("src/app/x.py", "src/app/.git/hooks/pre-commit", ("denied_internal",)),
        ("src/app/x.py", ".anti-sprawl/plan.json", ("denied_internal",)),
        ("src/app/x.py", "src/app/.env", ("denied_secret",)),
        ("src/app/x.py", "../outside/x.py", ("escape_root",)),
        ("src/app/x.py", "/tmp/x.py", ("absolute",)),
        ("src/app/x.py", "src/app/real.py", ("exists",)),  # never over an existing file
        ("src/app/x.py", "src/app/x.py", ("bad_path",)),
        ("src/app/missing.py", "src/app/y.py", ("not_found",)),
    ],
)
def test_move_refusals(lay: Layout, src: str, dst: str, reasons: tuple[str, ...]) -> None:
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.move(src, dst), *reasons)


def test_move_a_directory_into_itself_or_over_another(lay: Layout) -> None:
    _tree(lay, "src/app/a/f.py", "src/app/b/g.py")
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.move("src/app/a", "src/app/a/inner"), "bad_path")
    assert_denied(lay, fw, lambda: fw.move("src/app/a", "src/app/b"), "exists")
    (lay.repo / "src/app/empty").mkdir()
    lay.seal()
    assert_denied(lay, fw, lambda: fw.move("src/app/x.py", "src/app/empty"), "exists")


def test_move_a_directory_holding_an_out_of_scope_file_moves_nothing(lay: Layout) -> None:
    _tree(lay, "src/app/mixed/a.py", "src/app/mixed/b.py")
    fw = lay.firewall(write_scope=["src/app/mixed/a.py", "src/app/dest/**"])
    assert_denied(lay, fw, lambda: fw.move("src/app/mixed", "src/app/dest/mixed"))


def test_move_never_crosses_or_moves_a_symlink(lay: Layout) -> None:
    _tree(lay, "src/app/real/f.py", "src/app/tree/a.py")
    os.symlink("real", lay.repo / "src/app/alias")  # inside the scope, still refused
    os.symlink(str(lay.outside), lay.repo / "src/app/out")
    os.symlink("../x.py", lay.repo / "src/app/tree/link")
    lay.seal()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.move("src/app/alias/f.py", "src/app/f.py"), "symlink_path")
    assert_denied(lay, fw, lambda: fw.move("src/app/x.py", "src/app/alias/x.py"), "symlink_path")
    assert_denied(
        lay, fw, lambda: fw.move("src/app/x.py", "src/app/alias/new/x.py"), "symlink_path"
    )
    assert_denied(
        lay,
        fw,
        lambda: fw.move("src/app/x.py", "src/app/out/x.py"),
        "symlink_path",
        "symlink_escape",
    )
    assert_denied(lay, fw, lambda: fw.move("src/app/alias", "src/app/alias2"), "symlink_path")
    assert_denied(lay, fw, lambda: fw.move("src/app/tree", "src/app/tree2"), "symlink_path")
    assert not (lay.outside / "x.py").exists()


def test_move_refuses_a_hard_link(lay: Layout) -> None:
    os.link(lay.outside / "victim", lay.repo / "src/app/h")
    lay.seal()
    fw = lay.firewall()
    assert_denied(lay, fw, lambda: fw.move("src/app/h", "src/app/h2"), "hardlink")
