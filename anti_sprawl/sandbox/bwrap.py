"""The bubblewrap layer: a new root holding only the allow-list view, entered as an
unprivileged user with resource limits set.

As root, bwrap runs *without* a user namespace: inside one, the sandbox uid would map to host
root and every root-only file bound in would be readable. Instead it unshares ipc/pid/net/uts
(and cgroup where it can), keeps only ``CAP_SETUID``/``CAP_SETGID`` and ``CAP_SYS_ADMIN`` (for
the shim's one remount: ``/tmp``'s inode cap, docs/security.md P21), and the entry shim
(``ENTRY``, run by the interpreter whose prefix is bound) sets the rlimits, drops to
``policy.sandbox_uid`` with no supplementary groups, sets ``no_new_privs`` and execs the
command: uid 65534, no capabilities, and ``RLIMIT_NPROC`` now binds (it never binds uid 0).
Files must be readable by that uid (a checkout made under umask 022 is). Other users get the
user-namespace path: their own uid is not privileged.

Mount order matters: ``/dev``, ``/proc`` and the size-capped ``/tmp`` first, then the system
directories, ``/etc`` entries, toolchain trees (each missing parent created 0755 first, since
bwrap would create it 0700 and hide what is bound below), the content trees, and last the
masks over secret and internal paths inside them; ``/`` itself is remounted read-only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..host_tools import host_tool
from .policy import ResourceLimits, SandboxView

__all__ = ["ENTRY", "bwrap_argv", "entry_argv", "rlimits"]

# Runs inside the sandbox before the command: limits, the /tmp inode cap (as root: bwrap's
# --tmpfs has no inode option, so its tmpfs is remounted with nr_inodes while CAP_SYS_ADMIN is
# still held), then the uid drop, which clears every capability, then exec. libc is called
# through ``_ctypes``'s own ``dlsym``/``call_function`` (what ``ctypes.CDLL`` does underneath,
# arguments converted alike: ints as C ints, bytes as char*, None as NULL): importing
# ``ctypes`` itself was 4 of the shim's ~12 ms of CPU, paid on every sandboxed command.
ENTRY = r"""
import _ctypes, os, resource, sys
cfg = dict(word.split("=") for word in sys.argv[1].split()); argv = sys.argv[3:]
libc = _ctypes.dlopen(None)
def call(name, *args):
    return _ctypes.call_function(_ctypes.dlsym(libc, name), args)
for name, value in cfg.items():
    if name.startswith("RLIMIT_"):
        resource.setrlimit(getattr(resource, name), (int(value), int(value)))
if cfg["uid"] != "-":
    uid = int(cfg["uid"])
    # MS_REMOUNT | MS_NOSUID | MS_NODEV: only nr_inodes changes (a smaller cap is allowed)
    opts = ("nr_inodes=%d" % int(cfg["tmp_inodes"])).encode()
    if call("mount", None, b"/tmp", None, 32 | 2 | 4, opts) != 0:
        os.write(2, b"anti-sprawl sandbox: cannot cap /tmp's files\n"); os._exit(126)
    os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
    caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith(("CapPrm", "CapEff"))]
    if os.geteuid() == 0 or os.getuid() == 0 or caps != ["0" * 16] * 2:
        os.write(2, b"anti-sprawl sandbox: the uid drop failed\n"); os._exit(126)
if call("prctl", 38, 1, 0, 0, 0) != 0:
    os.write(2, b"anti-sprawl sandbox: no_new_privs failed\n"); os._exit(126)
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    os.write(2, ("%s: %s\n" % (argv[0], exc.strerror)).encode()); os._exit(127)
"""


def rlimits(limits: ResourceLimits) -> list[tuple[str, int]]:
    """The ``resource`` limits a sandboxed command gets (no core dumps, ever)."""
    return [
        ("RLIMIT_NPROC", limits.processes),
        ("RLIMIT_AS", limits.memory_bytes),
        ("RLIMIT_FSIZE", limits.file_size_bytes),
        ("RLIMIT_CORE", 0),
    ]


def entry_argv(argv: Sequence[str], limits: ResourceLimits, uid: int | None) -> list[str]:
    """``python -I -S -c ENTRY cfg -- argv``: the command behind the in-sandbox shim.

    ``cfg`` is ``NAME=integer`` words (``RLIMIT_NPROC=512 ... uid=65534 tmp_inodes=65536``,
    ``uid=-``: no uid drop), not JSON: ``import json`` (and the ``re`` and ``enum`` it pulls
    in) was 8 of the shim's 19 ms of CPU, paid on every sandboxed command."""
    words = [f"{name}={value}" for name, value in rlimits(limits)]
    words += [f"uid={'-' if uid is None else uid}", f"tmp_inodes={limits.tmp_inodes}"]
    cfg = " ".join(words)
    return [os.path.realpath(sys.executable), "-I", "-S", "-c", ENTRY, cfg, "--", *argv]


class _Mounts:
    """bwrap mount arguments, creating each missing parent directory 0755 exactly once."""

    def __init__(self) -> None:
        self.args: list[str] = []
        self.dirs: set[Path] = {Path("/"), Path("/tmp"), Path("/dev"), Path("/proc")}
        self.trees: list[Path] = []  # bound trees: their directories exist already
        self.covered: list[Path] = []  # masked directories (empty tmpfs): nothing exists below

    def _exists(self, parent: Path) -> bool:
        if parent in self.dirs:
            return True
        if any(parent == c or parent.is_relative_to(c) for c in self.covered):
            return False
        return any(parent.is_relative_to(t) for t in self.trees)

    def parents(self, path: Path) -> None:
        for parent in reversed(path.parents):
            if not self._exists(parent):
                self.args += ["--perms", "0755", "--dir", str(parent)]
                self.dirs.add(parent)

    def bind(self, path: Path, *, writable: bool = False) -> None:
        self.parents(path)
        self.args += ["--bind" if writable else "--ro-bind", str(path), str(path)]
        if path.is_dir():
            self.trees.append(path)

    def mask(self, path: Path) -> None:
        if path.is_dir():
            self.args += ["--perms", "0755", "--tmpfs", str(path)]
            self.covered.append(path)
        else:
            self.args += ["--ro-bind", "/dev/null", str(path)]


def bwrap_argv(  # noqa: C901 - one argv in mount order (see the module docstring)
    argv: Sequence[str],
    view: SandboxView,
    env: Mapping[str, str],
    limits: ResourceLimits,
    uid: int,
    binary: str = "bwrap",
    *,
    network: bool = False,
) -> list[str]:
    """The full bwrap command line for ``argv`` in ``view`` (``network``: share the host's
    network namespace, only ever for a setup command the user allowed on the network)."""
    out = [host_tool(binary) or binary]
    as_root = os.geteuid() == 0
    if as_root:
        out += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        out += ["--cap-add", "CAP_SYS_ADMIN"]  # for the shim's /tmp remount only (ENTRY)
    else:
        out += ["--unshare-user", "--uid", str(uid), "--gid", str(uid), "--cap-drop", "ALL"]
    out += ["--unshare-ipc", "--unshare-pid", "--unshare-uts"]
    if not network:
        out.append("--unshare-net")
    out += ["--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv"]
    out += ["--dev", "/dev", "--proc", "/proc"]
    out += ["--perms", "01777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    mounts = _Mounts()
    for path in view.system:
        mounts.bind(path)
    for link, target in view.links:
        mounts.args += ["--symlink", target, str(link)]
        mounts.dirs.add(link)
    for path in [*view.etc, *view.toolchain]:
        mounts.bind(path)
    # Each content tree, outermost first, then its masks: an inner tree (a worktree inside an
    # allowed checkout's masked .anti-sprawl) is bound again on top of the outer one's masks.
    for path in view.content:
        mounts.bind(path, writable=path in view.writable)
        for masked in view.masked:
            if masked.is_relative_to(path) and not any(
                masked.is_relative_to(inner) and inner != path and inner.is_relative_to(path)
                for inner in view.content
            ):
                mounts.mask(masked)
    for path in view.writable:
        if path not in view.content:
            mounts.bind(path, writable=True)
    out += mounts.args
    out += ["--remount-ro", "/", "--chdir", str(view.workdir)]
    for key, value in env.items():
        out += ["--setenv", key, value]
    return [*out, "--", *entry_argv(argv, limits, uid if as_root else None)]
