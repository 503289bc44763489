"""The Landlock sandbox layer: a tiny launcher that restricts itself, then execs the command.

Used where bubblewrap cannot run (e.g. Docker's default seccomp profile). The launcher runs
as ``python -I -S -c LAUNCHER CONFIG -- argv...``, so nothing runs between ``fork`` and the
restriction in our own process (no ``preexec_fn``). It drops every capability when started
as root (securebits ``NOROOT`` so ``exec`` cannot regain them), sets ``no_new_privs``, then
applies a Landlock ruleset: read/execute on the listed trees, full access only to the
writable trees, no TCP bind/connect (ABI >= 4), no abstract unix sockets or signals outside
the sandbox (ABI >= 6); and a seccomp filter refusing metadata changes (chmod, chown,
utimes, xattrs), which Landlock does not cover. Weaker than bubblewrap: no private
``/proc`` or ``/tmp`` (``TMPDIR`` and ``HOME`` point at a private directory instead), UDP
and pathname unix sockets are not blocked, and processes that call ``setsid`` escape the
timeout's process-group kill."""

from __future__ import annotations

import ctypes
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["LAUNCHER", "MIN_ABI", "abi_version", "launcher_argv"]

MIN_ABI = 4  # the first ABI that can restrict TCP; below it there is no network isolation
_SYS_CREATE_RULESET = 444  # the same number on every Linux architecture
_CREATE_RULESET_VERSION = 1

LAUNCHER = r"""
import ctypes, json, os, sys
cfg = json.loads(sys.argv[1]); argv = sys.argv[3:]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
def die(msg):
    os.write(2, ("anti-sprawl landlock launcher: %s\n" % msg).encode()); os._exit(126)
def check(rc, what):
    if rc < 0: die("%s failed: %s" % (what, os.strerror(ctypes.get_errno())))
    return rc
if os.geteuid() == 0:
    # NOROOT(+locked), NO_SETUID_FIXUP(+locked), KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE(+locked)
    check(libc.prctl(28, 0xEF, 0, 0, 0), "securebits")
    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) < 0 and ctypes.get_errno() != 22:
            die("capability bounding set drop failed")
libc.prctl(47, 4, 0, 0, 0)
class Hdr(ctypes.Structure): _fields_ = [("v", ctypes.c_uint32), ("pid", ctypes.c_int)]
class Caps(ctypes.Structure): _fields_ = [("e", ctypes.c_uint32), ("p", ctypes.c_uint32), ("i", ctypes.c_uint32)]
check(libc.capset(ctypes.byref(Hdr(0x20080522, 0)), (Caps * 2)()), "capset")
check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
if abi < cfg["min_abi"]: die("landlock ABI %d < %d" % (abi, cfg["min_abi"]))
fs = (1 << 13) - 1
if abi >= 2: fs |= 1 << 13
if abi >= 3: fs |= 1 << 14
if abi >= 5: fs |= 1 << 15
file_rights = 0b111 | (1 << 14) | (1 << 15)
read = 0b1101
rw = fs & ~((1 << 6) | (1 << 11))
class Attr(ctypes.Structure): _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]
class Beneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]
attr = Attr(fs, 0b11, 0b11 if abi >= 6 else 0)
size = 24 if abi >= 6 else 16
rs = check(libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)), "create_ruleset")
def allow(path, rights):
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    if not os.path.isdir(path): rights &= file_rights
    check(libc.syscall(445, rs, 1, ctypes.byref(Beneath(rights & fs, fd)), 0), "add_rule " + path)
    os.close(fd)
for p in cfg["read"]: allow(p, read)
for p in cfg["devices"]: allow(p, read | 0b10 | (1 << 14))
for p in cfg["write"]: allow(p, rw)
check(libc.syscall(446, rs, 0), "restrict_self")
os.close(rs)
# seccomp: Landlock leaves metadata alone, and uid 0 without capabilities still owns root's
# files, so chmod/chown/utimes/xattr calls (and io_uring, which bypasses seccomp) get EPERM.
arch, denied = cfg["seccomp_arch"], cfg["seccomp_denied"]
RET_ALLOW, RET_EPERM, RET_KILL = 0x7FFF0000, 0x00050001, 0x80000000
body = [(0x20, 0, 0, 4), (0x15, 0, len(denied) + 4, arch), (0x20, 0, 0, 0),
        (0x35, len(denied) + 1, 0, 0x40000000)]
body += [(0x15, len(denied) - i, 0, nr) for i, nr in enumerate(denied)]
body += [(0x06, 0, 0, RET_ALLOW), (0x06, 0, 0, RET_EPERM), (0x06, 0, 0, RET_KILL)]
class Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]
class Prog(ctypes.Structure): _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]
insns = (Insn * len(body))(*[Insn(*i) for i in body])
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
check(libc.prctl(22, 2, ctypes.addressof(Prog(len(body), insns)), 0, 0), "seccomp")
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    os.write(2, ("%s: %s\n" % (argv[0], exc.strerror)).encode()); os._exit(127)
"""

# Metadata syscalls (chmod/chown/utimes/xattr families, io_uring) answered with EPERM, per
# machine; elsewhere the Landlock layer is unavailable.
_SYSCALLS = {
    "x86_64": {
        "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94, "utime": 132,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197,
        "lremovexattr": 198, "fremovexattr": 199, "utimes": 235, "fchownat": 260,
        "futimesat": 261, "fchmodat": 268, "utimensat": 280, "io_uring_setup": 425,
        "fchmodat2": 452, "setxattrat": 463, "removexattrat": 466,
    },
    "aarch64": {
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15,
        "fremovexattr": 16, "fchmod": 52, "fchmodat": 53, "fchownat": 54, "fchown": 55,
        "utimensat": 88, "io_uring_setup": 425, "fchmodat2": 452, "setxattrat": 463,
        "removexattrat": 466,
    },
}  # fmt: skip
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
# Never readable inside, on top of the caller's hidden paths: raw devices, the shared /tmp.
_ALWAYS_HIDDEN = (Path("/dev"), Path("/tmp"))


def seccomp_supported() -> bool:
    """Whether the launcher has a seccomp syscall table for this machine."""
    return os.uname().machine in _SYSCALLS


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(
        ctypes.c_long(_SYS_CREATE_RULESET),
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(_CREATE_RULESET_VERSION),
    )
    return max(int(abi), 0)


def _allowed_below(root: Path, hidden: Sequence[Path]) -> list[str]:
    """``root`` itself, or its children recursively, so that no ``hidden`` path is covered.

    Landlock rules only add access, so a hidden path inside a readable tree is carved out
    by granting each of its siblings instead of the tree.
    """
    if root in hidden:
        return []
    if not any(h.is_relative_to(root) for h in hidden):
        return [str(root)]
    out: list[str] = []
    try:
        children = sorted(root.iterdir())
    except OSError:
        return out
    for child in children:
        if not child.is_symlink():
            out += _allowed_below(child, hidden)
    return out


def _readable_roots(extra: Sequence[Path], hidden: Sequence[Path]) -> list[str]:
    roots = _allowed_below(Path("/"), [*hidden, *_ALWAYS_HIDDEN])
    # The interpreter, its environment and the command's own trees come back explicitly.
    for p in (Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent, *extra):
        roots.append(str(p))
    return sorted(dict.fromkeys(roots))


def launcher_argv(
    argv: Sequence[str],
    *,
    readable: Sequence[Path],
    writable: Sequence[Path],
    hidden: Sequence[Path],
) -> list[str]:
    """``python -I -S -c LAUNCHER cfg -- argv``: run ``argv`` under a fresh Landlock domain."""
    machine = os.uname().machine
    denied = sorted(_SYSCALLS[machine].values())
    cfg = {
        "seccomp_arch": _AUDIT_ARCH[machine],
        "seccomp_denied": denied,
        "min_abi": MIN_ABI,
        "read": _readable_roots(readable, hidden),
        "write": [str(p) for p in writable],
        "devices": list(_DEVICES),
    }
    return [sys.executable, "-I", "-S", "-c", LAUNCHER, json.dumps(cfg), "--", *argv]
