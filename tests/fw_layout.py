"""The firewall test layout from docs/security.md, built on the real filesystem, and its checks.

``tmp/repo`` is the workspace (read scope ``src/**, docs/**``, write scope ``src/app/**``);
``tmp/outside`` holds ``secret`` (``CANARY-OUT``) and ``victim``; ``tmp/home`` is a fake home
with ``.ssh/id_rsa`` and ``.aws/credentials``. Snapshots record every entry without following
links, so "the filesystem outside is unchanged" is a plain equality.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from anti_sprawl.fs import safe_fs
from anti_sprawl.fs.firewall import Firewall, FirewallError, Violation

READ_SCOPE = ["src/**", "docs/**"]
WRITE_SCOPE = ["src/app/**"]
CANARIES = ("CANARY-OUT", "CANARY-ENV", "CANARY-HOME", "CANARY-AWS", "CANARY-VICTIM")
BACKENDS = ["openat2", "walk"]

REPO_FILES = {
    "src/app/x.py": "print('x')\n",
    "src/app/real.py": "REAL = 1\n",
    "src/lib.py": "LIB = 1\n",
    "src/sub/x.py": "SUB = 1\n",
    "docs/a.md": "# docs a\n",
    "docs-private/a.md": "PRIVATE\n",
    "README.md": "readme\n",
    ".env": "TOKEN=CANARY-ENV\n",
    ".env.example": "TOKEN=changeme\n",
    ".gitmodules": "[submodule]\n",
    ".git/config": "[core]\n",
    ".git/hooks/README": "hooks\n",
    ".anti-sprawl/plan.json": "{}\n",
}


@dataclass
class Layout:
    """Paths of one built layout plus the snapshots taken right after building it."""

    tmp: Path
    repo: Path
    outside: Path
    home: Path
    use_openat2: bool
    before: dict[str, dict[str, Any]] = field(default_factory=dict)

    def firewall(self, **kw: Any) -> Firewall:
        kw.setdefault("use_openat2", self.use_openat2)
        read = kw.pop("read_scope", READ_SCOPE)
        write = kw.pop("write_scope", WRITE_SCOPE)
        return Firewall(kw.pop("root", self.repo), read, write, **kw)

    def seal(self) -> None:
        """Take the reference snapshots (call after adding test-specific entries)."""
        self.before = {"outside": snapshot(self.outside), "home": snapshot(self.home)}

    def assert_outside_unchanged(self) -> None:
        assert snapshot(self.outside) == self.before["outside"]
        assert snapshot(self.home) == self.before["home"]


def build(tmp: Path, *, use_openat2: bool = True) -> Layout:
    """Create repo, outside and home under ``tmp``."""
    repo, outside, home = tmp / "repo", tmp / "outside", tmp / "home"
    for rel, text in REPO_FILES.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    outside.mkdir()
    (outside / "secret").write_text("CANARY-OUT\n")
    (outside / "victim").write_text("CANARY-VICTIM\n")
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("CANARY-HOME\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("CANARY-AWS\n")
    layout = Layout(tmp, repo, outside, home, use_openat2)
    layout.seal()
    return layout


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry below ``root``: kind plus content, link target or size; links not followed."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            elif stat.S_ISREG(st.st_mode) and st.st_size <= 1_000_000:
                out[rel] = ("file", path.read_bytes(), st.st_mode & 0o777)
            else:
                out[rel] = ("other", stat.S_IFMT(st.st_mode), st.st_size)
    return out


def assert_denied(
    layout: Layout, fw: Firewall, call: Callable[[], object], *reasons: str
) -> Violation:
    """``call`` is refused (with one of ``reasons``), recorded, and changes nothing anywhere."""
    repo_before = snapshot(layout.repo)
    with pytest.raises(FirewallError) as info:
        call()
    violation = info.value.violation
    if reasons:
        assert violation.reason in reasons, violation
    assert fw.violations
    assert fw.violations[-1] == violation
    assert not any(c in str(info.value) for c in CANARIES)
    assert snapshot(layout.repo) == repo_before
    layout.assert_outside_unchanged()
    return violation


def backend_flag(name: str) -> bool:
    if name == "openat2" and not safe_fs.openat2_available():
        pytest.skip("openat2 is not available on this kernel")
    return name == "openat2"
