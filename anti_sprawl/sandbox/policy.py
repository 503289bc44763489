"""The sandbox policy: one documented object saying what a sandboxed command may see and use.

A command sees an **allow-list view** of the host, never the host minus a deny list:

- the node's worktree (read-only unless the caller makes it writable) and any extra tree the
  caller names (e.g. the user's checkout), each with ``.git``, ``.anti-sprawl`` and every name
  of the secret catalogue (``fs.deny_rules.DEFAULT_DENY``) masked, even deep inside (except in
  an untracked environment the command names, ``command_template.environments``);
- the toolchain: ``/usr`` and the root-level lib/bin directories, the interpreter's real
  prefix and virtualenv, and the environment the command names (its executable's prefix, or a
  virtualenv and that venv's base interpreter) — a toolchain under ``$HOME`` is bound alone,
  never the home directory itself or anything above it;
- a minimal ``/etc`` (``ETC_ALLOW``: loader cache, users and groups, name service and hosts,
  time zone, CA certificates, alternatives; never ``shadow``, ``ssl/private`` or tool configs
  that may hold credentials such as ``pip.conf``, ``npmrc``, ``gitconfig``);
- a private ``/tmp`` of ``limits.tmp_bytes``, a minimal ``/dev`` and a private ``/proc``;
- read-only ``allow_paths`` the user adds with ``--sandbox-allow PATH`` (masked like the
  worktree).

Nothing else: not ``$HOME``, not ``<repo>/.git`` or ``<repo>/.anti-sprawl``, not other worktrees.
``ResourceLimits`` bound what a command may consume; ``describe_policy`` is what the run report
prints. ``build_view`` turns a policy and one command into the concrete paths.

Over 300 lines mostly because of this documentation: the code is the policy objects, the
mask walk and the view builder, one concern.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UsageError
from ..fs.deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from .toolchain import acceptable_toolchain, toolchain_trees

__all__ = [
    "ETC_ALLOW",
    "LIMIT_NAMES",
    "NETWORK_ETC",
    "SYSTEM_DIRS",
    "ResourceLimits",
    "SandboxLayer",
    "SandboxPolicy",
    "SandboxView",
    "build_view",
    "describe_policy",
    "mask_below",
    "parse_limit",
]

SandboxLayer = Literal["bwrap", "landlock"]
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ALLOW = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "localtime",
    "timezone",
    "os-release",
    "debian_version",
    "protocols",
    "services",
    "mime.types",
    "locale.alias",
    "magic",
    "magic.mime",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "crypto-policies",
    "alternatives",
    "python3",
    f"python3.{sys.version_info.minor}",
)
# Only for a setup command allowed on the network: name resolution.
NETWORK_ETC = ("resolv.conf",)
_GIB = 1 << 30
_MIB = 1 << 20
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": _MIB, "g": _GIB, "t": 1 << 40}
# The secret catalogue's names plus the internal directories (.git, .anti-sprawl).
_MASK_RULES = DenyRules(DEFAULT_DENY, DEFAULT_ALLOW)


# 1 GiB of /tmp holds 65,536 files: plenty for test suites, and a bounded amount of kernel
# memory (each inode costs about a kilobyte, whatever the file's size).
TMP_BYTES_PER_FILE = 16 * 1024


class ResourceLimits(BaseModel):
    """What one sandboxed command may consume; hitting a limit ends it with a named reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    processes: int = Field(
        default=512, ge=8, description="RLIMIT_NPROC: processes and threads of the sandbox user."
    )
    memory_bytes: int = Field(
        default=8 * _GIB, ge=64 * _MIB, description="RLIMIT_AS: address space per process."
    )
    file_size_bytes: int = Field(
        default=_GIB, ge=_MIB, description="RLIMIT_FSIZE: the largest file a command may write."
    )
    tmp_bytes: int = Field(default=_GIB, ge=_MIB, description="Size of the private /tmp.")
    tmp_files: int | None = Field(
        default=None,
        ge=64,
        description="Files (inodes) the private /tmp may hold; None: one per 16 KiB of its size.",
    )
    output_bytes: int = Field(
        default=64 * _MIB, ge=64 * 1024, description="Output kept in the log; more ends the run."
    )

    @property
    def tmp_inodes(self) -> int:
        """The private /tmp's inode cap: empty files cost no bytes but pin kernel memory."""
        return self.tmp_files or max(1024, self.tmp_bytes // TMP_BYTES_PER_FILE)


LIMIT_NAMES = {
    "processes": "processes",
    "memory": "memory_bytes",
    "file-size": "file_size_bytes",
    "tmp": "tmp_bytes",
    "tmp-files": "tmp_files",
    "output": "output_bytes",
}


def parse_limit(text: str) -> tuple[str, int]:
    """``NAME=VALUE`` (``memory=2G``, ``processes=256``) as a ``ResourceLimits`` field and value."""
    name, sep, raw = text.partition("=")
    field = LIMIT_NAMES.get(name.strip().lower())
    if not sep or field is None:
        names = ", ".join(LIMIT_NAMES)
        raise UsageError(f"bad --sandbox-limit {text!r}: use NAME=VALUE with NAME one of {names}")
    match = _SIZE.match(raw)
    if match is None or (field in ("processes", "tmp_files") and match.group(2)):
        raise UsageError(f"bad --sandbox-limit value {raw!r} (e.g. 512, 256M, 2G)")
    return field, int(match.group(1)) * _UNITS[match.group(2).lower()]


class SandboxPolicy(BaseModel):
    """How commands are confined; built once from settings by the CLI and passed down."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow_unsandboxed: bool = Field(
        default=False, description="The user's explicit unsafe flag: run with no OS sandbox."
    )
    layers: tuple[SandboxLayer, ...] = Field(
        default=("bwrap",),
        description="Layers to try, strongest first; Landlock only when the user asks for it.",
    )
    output_limit: int = Field(
        default=64 * 1024, ge=1024, description="Bytes of output kept (half head, half tail)."
    )
    env_allow: tuple[str, ...] = Field(
        default=(), description="Extra variable names to pass through (secret-looking ones never)."
    )
    allow_paths: tuple[Path, ...] = Field(
        default=(), description="Extra read-only paths (--sandbox-allow); secrets still masked."
    )
    home: Path | None = Field(
        default=None, description="The user's home directory: never bound, nor anything above it."
    )
    sandbox_uid: int = Field(
        default=65534, ge=1, description="Unprivileged uid commands run as when we are root."
    )
    bwrap_binary: str = Field(default="bwrap", description="The bubblewrap executable to use.")
    setup_network: bool = Field(
        default=False,
        description="--allow-setup-network: the plan's setup_command shares the host network "
        "(test commands never do).",
    )
    limits: ResourceLimits = Field(default_factory=ResourceLimits)


class SandboxView(BaseModel):
    """The concrete allow-list for one command: what is bound, masked, and where it runs."""

    workdir: Path
    system: list[Path] = Field(default_factory=list)  # bound read-only (dirs)
    links: list[tuple[Path, str]] = Field(default_factory=list)  # /bin -> usr/bin
    etc: list[Path] = Field(default_factory=list)
    toolchain: list[Path] = Field(default_factory=list)
    content: list[Path] = Field(default_factory=list)  # worktree, extra trees, allow paths
    writable: list[Path] = Field(default_factory=list)
    masked: list[Path] = Field(default_factory=list)  # secret and internal paths inside

    @property
    def readable(self) -> list[Path]:
        """Every read-only root, in mount order (system first, content last)."""
        out = [*self.system, *self.etc, *self.toolchain, *self.content]
        return list(dict.fromkeys(p for p in out if p not in self.writable))


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path.is_relative_to(r) for r in roots)


def mask_below(root: Path, unscanned: Sequence[Path] = ()) -> list[Path]:
    """Secret and internal paths inside ``root`` (symlinks left alone: never followed), not
    looking inside ``unscanned`` directories (environments the command names)."""
    skip = set(unscanned)
    out: list[Path] = []
    stack = [(root, "")]
    while stack:
        here, rel = stack.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        for entry in entries:
            sub = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_symlink():
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            if _MASK_RULES.entry_reason(sub, is_dir):
                out.append(Path(entry.path))
            elif is_dir and Path(entry.path) not in skip:
                stack.append((Path(entry.path), sub))
    return sorted(out)


def build_view(
    policy: SandboxPolicy,
    workdir: Path,
    argv0: str,
    env: Mapping[str, str],
    *,
    readable: Sequence[Path] = (),
    writable: Sequence[Path] = (),
    network: bool = False,
    executables: Sequence[Path] = (),
    unscanned: Sequence[Path] = (),
) -> SandboxView:
    """The allow-list view for one command run in ``workdir``.

    ``network``: add the resolver configuration a command sharing the host network needs;
    ``executables``: other programs the command names, whose toolchains are bound too;
    ``unscanned``: environment directories inside content trees (an untracked ``.venv`` the
    command runs) whose files are not masked: a virtualenv's CA bundle (``cacert.pem``)
    matches the secret catalogue, and scanning ``node_modules`` costs seconds per command.
    """
    workdir = Path(os.path.realpath(workdir))
    view = SandboxView(workdir=workdir)
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            view.links.append((path, os.readlink(path)))
        elif path.is_dir():
            view.system.append(path)
    etc = (*ETC_ALLOW, *(NETWORK_ETC if network else ()))
    view.etc = [Path("/etc", n) for n in etc if os.path.lexists(Path("/etc", n))]
    content = [workdir, *(Path(os.path.realpath(p)) for p in readable)]
    for raw in policy.allow_paths:
        path = Path(os.path.realpath(raw))
        if not path.exists():
            raise UsageError(f"--sandbox-allow {raw}: no such path")
        if path == Path("/"):
            raise UsageError("--sandbox-allow /: would expose the whole host")
        content.append(path)
    homes = [policy.home] if policy.home is not None else []
    for path in toolchain_trees(argv0, env, executables):
        if _under(path, view.system) or _under(path, content):
            continue
        if acceptable_toolchain(path, homes, content):
            view.toolchain.append(path)
    view.toolchain = _outermost(view.toolchain)
    # Content trees stay separate, outermost first: a worktree inside an allowed checkout
    # (under its masked .anti-sprawl) is bound again after the checkout's masks.
    view.content = sorted(dict.fromkeys(content), key=lambda p: (len(p.parts), str(p)))
    view.writable = [Path(os.path.realpath(p)) for p in writable]
    skip = [Path(os.path.realpath(p)) for p in unscanned]
    view.masked = sorted({m for c in view.content for m in mask_below(c, skip)})
    return view


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without duplicates or paths already inside another one."""
    ordered = sorted(dict.fromkeys(paths), key=lambda p: len(p.parts))
    out: list[Path] = []
    for path in ordered:
        if not _under(path, out):
            out.append(path)
    return out


def _size(n: int) -> str:
    for unit, size in (("G", _GIB), ("M", _MIB), ("K", 1024)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}iB"
    return f"{n} bytes"


LANDLOCK_GAPS = (
    "pathname unix sockets it can name (e.g. a docker socket) are reachable",
    "no private /proc or /tmp: other processes' /proc entries are listed",
    "as root, no process-count limit (RLIMIT_NPROC does not bind uid 0)",
    "as root, uid 0 without capabilities still owns root's files inside the allowed trees",
)


def describe_policy(policy: SandboxPolicy, layer: str) -> str:
    """One line for the run report: the layer, what is exposed, the limits, what is missing."""
    lim = policy.limits
    limits = (
        f"limits: {lim.processes} processes, {_size(lim.memory_bytes)} address space, "
        f"{_size(lim.file_size_bytes)} files, {_size(lim.tmp_bytes)} /tmp "
        f"({lim.tmp_inodes} files), "
        f"{_size(lim.output_bytes)} output"
    )
    extra = f"; extra read-only: {', '.join(map(str, policy.allow_paths))}"
    view = "view: worktree, toolchain, minimal /etc, private /tmp; secrets masked" + (
        extra if policy.allow_paths else ""
    )
    if policy.setup_network:
        limits += "; setup_command may use the network (--allow-setup-network)"
    if layer == "bwrap":
        who = f"uid {policy.sandbox_uid}" if os.geteuid() == 0 else "unprivileged user namespace"
        return f"bwrap ({who}, no network); {view}; {limits}"
    if layer == "landlock":
        gaps = "; ".join(LANDLOCK_GAPS)
        return f"landlock + seccomp (opted in; weaker: {gaps}); {view}; {limits}"
    return "NONE: commands run UNSANDBOXED (--allow-unsandboxed)"
