"""The Landlock sandbox layer: a tiny launcher that restricts itself, then execs the command.

Only used when the user opts in (``--sandbox landlock``), e.g. where bubblewrap cannot run
(Docker's default seccomp profile); the run report then lists what it does not block
(``sandbox.policy.LANDLOCK_GAPS``). It grants the same allow-list view as bubblewrap (read
and execute on the listed trees, the masked paths carved out). The launcher runs
as ``python -I -S -c LAUNCHER CONFIG -- argv...``, so nothing runs between ``fork`` and the
restriction in our own process (no ``preexec_fn``). It drops every capability when started
as root (securebits ``NOROOT`` so ``exec`` cannot regain them), sets ``no_new_privs``, then
applies the resource limits and a Landlock ruleset: read/execute on the listed trees, full
access only to the writable trees, no TCP bind/connect (ABI >= 4), no abstract unix sockets
or signals outside the sandbox (ABI >= 6); and a seccomp filter that adds what Landlock does
not cover: metadata changes (chmod, chown, utimes, xattrs) and io_uring get EPERM, ``socket``
is refused for every family but unix and netlink (no UDP, raw or packet sockets), and
``setsid``/``setpgid`` get EPERM so no process leaves the group the timeout kills. Still
weaker than bubblewrap: no private ``/proc`` or ``/tmp`` (``TMPDIR`` and ``HOME`` point at a
private directory instead), pathname unix sockets are reachable, and as root there is no
process-count limit."""

from __future__ import annotations

import ctypes
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["LAUNCHER", "MIN_ABI", "abi_version", "launcher_argv", "seccomp_program"]

MIN_ABI = 4  # the first ABI that can restrict TCP; below it there is no network isolation
_SYS_CREATE_RULESET = 444  # the same number on every Linux architecture
_CREATE_RULESET_VERSION = 1

LAUNCHER = r"""
import ctypes, json, os, resource, sys
cfg = json.loads(sys.argv[1]); argv = sys.argv[3:]
for name, value in cfg["rlimits"]:
    resource.setrlimit(getattr(resource, name), (value, value))
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
for p in cfg["list"]: allow(p, 1 << 3)
for p in cfg["devices"]: allow(p, read | 0b10 | (1 << 14))
for p in cfg["write"]: allow(p, rw)
check(libc.syscall(446, rs, 0), "restrict_self")
os.close(rs)
# seccomp (see seccomp_program): metadata calls, io_uring, setsid/setpgid and every socket
# family but unix and netlink are refused; a foreign architecture is killed.
body = cfg["seccomp"]
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

# Syscalls answered with EPERM, per machine (elsewhere the Landlock layer is unavailable):
# metadata changes Landlock does not cover, io_uring (it bypasses seccomp), and setsid/setpgid
# (a process in a new session or group would escape the timeout's process-group kill).
_SYSCALLS = {
    "x86_64": {
        "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94, "utime": 132,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197,
        "lremovexattr": 198, "fremovexattr": 199, "utimes": 235, "fchownat": 260,
        "futimesat": 261, "fchmodat": 268, "utimensat": 280, "io_uring_setup": 425,
        "fchmodat2": 452, "setxattrat": 463, "removexattrat": 466, "setsid": 112,
        "setpgid": 109,
    },
    "aarch64": {
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15,
        "fremovexattr": 16, "fchmod": 52, "fchmodat": 53, "fchownat": 54, "fchown": 55,
        "utimensat": 88, "io_uring_setup": 425, "fchmodat2": 452, "setxattrat": 463,
        "removexattrat": 466, "setsid": 157, "setpgid": 154,
    },
}  # fmt: skip
_SOCKET = {"x86_64": 41, "aarch64": 198}
_SOCKET_FAMILIES = (1, 16)  # AF_UNIX, AF_NETLINK: everything else (inet, inet6, packet) refused
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


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


def _allowed_below(root: Path, hidden: Sequence[Path], listed: list[str]) -> list[str]:
    """``root`` itself, or its children recursively, so that no ``hidden`` path is covered.

    Landlock rules only add access, so a hidden path inside a readable tree is carved out
    by granting each of its siblings instead of the tree; the directories on the way get
    list-only access (``listed``), so a worktree holding a masked ``.git`` stays listable.
    """
    if root in hidden:
        return []
    if not any(h.is_relative_to(root) for h in hidden):
        return [str(root)]
    listed.append(str(root))
    out: list[str] = []
    try:
        children = sorted(root.iterdir())
    except OSError:
        return out
    for child in children:
        if not child.is_symlink():
            out += _allowed_below(child, hidden, listed)
    return out


_LD_W_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW, _KILL = 0x7FFF0000, 0x80000000
_EPERM, _EACCES = 0x00050001, 0x0005000D


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The classic-BPF filter the launcher loads, as ``(code, jt, jf, k)`` instructions."""
    denied = sorted(_SYSCALLS[machine].values())
    # Symbolic program: ("jeq", k, label_true, label_false) with None meaning "next".
    prog: list[tuple[str, int, str | None, str | None]] = [
        ("ld", 4, None, None),  # seccomp_data.arch
        ("jeq", _AUDIT_ARCH[machine], None, "kill"),
        ("ld", 0, None, None),  # seccomp_data.nr
        ("jge", 0x40000000, "kill", None),  # x32 ABI numbers
        ("jeq", _SOCKET[machine], "socket", None),
        *(("jeq", nr, "eperm", None) for nr in denied),
        ("ret", _ALLOW, None, None),
        ("label:socket", 0, None, None),
        ("ld", 16, None, None),  # seccomp_data.args[0], the low word: the address family
        *(("jeq", family, "allow", None) for family in _SOCKET_FAMILIES),
        ("ret", _EACCES, None, None),
        ("label:allow", 0, None, None),
        ("ret", _ALLOW, None, None),
        ("label:eperm", 0, None, None),
        ("ret", _EPERM, None, None),
        ("label:kill", 0, None, None),
        ("ret", _KILL, None, None),
    ]
    labels: dict[str, int] = {}
    code: list[tuple[str, int, str | None, str | None]] = []
    for instr in prog:
        if instr[0].startswith("label:"):
            labels[instr[0][6:]] = len(code)
        else:
            code.append(instr)
    out: list[tuple[int, int, int, int]] = []
    for i, (name, k, on_true, on_false) in enumerate(code):
        jt = 0 if on_true is None else labels[on_true] - i - 1
        jf = 0 if on_false is None else labels[on_false] - i - 1
        if name == "ld":
            out.append((_LD_W_ABS, 0, 0, k))
        elif name == "ret":
            out.append((_RET, 0, 0, k))
        else:
            out.append((_JEQ if name == "jeq" else _JGE, jt, jf, k))
    return out


def _readable_roots(
    readable: Sequence[Path], hidden: Sequence[Path]
) -> tuple[list[str], list[str]]:
    """The allow-list with every hidden path carved out: (readable roots, list-only dirs)."""
    roots: list[str] = []
    listed: list[str] = []
    for root in [*readable, Path("/proc")]:
        roots += _allowed_below(root, hidden, listed)
    return sorted(dict.fromkeys(roots)), sorted(dict.fromkeys(listed))


def launcher_argv(
    argv: Sequence[str],
    *,
    readable: Sequence[Path],
    writable: Sequence[Path],
    hidden: Sequence[Path],
    rlimits: Sequence[tuple[str, int]] = (),
) -> list[str]:
    """``python -I -S -c LAUNCHER cfg -- argv``: run ``argv`` under a fresh Landlock domain."""
    read, listed = _readable_roots(readable, hidden)
    cfg = {
        "seccomp": seccomp_program(os.uname().machine),
        "min_abi": MIN_ABI,
        "read": read,
        "list": listed,
        "write": [str(p) for p in writable],
        "devices": list(_DEVICES),
        "rlimits": [list(r) for r in rlimits],
    }
    return [sys.executable, "-I", "-S", "-c", LAUNCHER, json.dumps(cfg), "--", *argv]
