"""Running a node's commands in an allow-list view, without network, within resource limits.

File-tool rules do not bind a shell (docs/security.md), so commands run under an OS sandbox
described by one ``SandboxPolicy`` (:mod:`.policy`: what is bound, masked, limited):
bubblewrap by default (:mod:`.bwrap`), Landlock + seccomp only when the user opts in with
``--sandbox landlock`` (:mod:`.landlock`, weaker: the run report lists what it does not block),
and nothing at all only with the explicit unsafe flag. When the chosen layer does not work
here, commands are refused with the install hint. The environment is built from an
allow-list, never by filtering. A timeout or the output cap kills the whole process group;
output is kept as head + tail, redacted, with the full (redacted) log on disk; a command that
hit a resource limit says which in ``CommandResult.limit``.

Over 300 lines: probing a layer runs the very wrapper a command runs in, so the probe stays
next to ``run_command`` (moving it out would also touch run/runner.py, which imports it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, Field

from ..errors import RunError
from ..fs.files import atomic_write_text
from ..host_tools import host_tool
from . import landlock
from .bwrap import bwrap_argv, rlimits
from .limits import LimitHit, handed_over, limit_hit
from .policy import (
    SandboxLayer,
    SandboxPolicy,
    SandboxView,
    build_view,
    describe_policy,
)
from .process import OutputCapture, execute
from .toolchain import named_paths
from .user_env import cache_env

__all__ = [
    "CommandResult",
    "Layer",
    "LimitHit",
    "SandboxInfo",
    "SandboxLayer",
    "SandboxPolicy",
    "SandboxUnavailable",
    "probe_sandbox",
    "run_command",
    "sandbox_env",
    "umask_problem",
    "unavailable_message",
]

Layer = Literal["bwrap", "landlock", "none"]
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
_USERNS_UIDS = (65534, 1000)
_PROBE_TIMEOUT = 15.0
_SPOOL_BYTES = 1 << 20  # a command's raw output is held in memory up to this, then on disk
_DENIED_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
_DENIED_PREFIXES = ("ANTHROPIC_", "OPENAI_", "AWS_", "GITHUB_", "GH_", "AZURE_", "GOOGLE_")


class SandboxUnavailable(RunError):
    """No sandbox layer works here and running unsandboxed was not allowed."""


class SandboxInfo(BaseModel):
    """Which layer commands will use here, what that exposes, and why others did not work."""

    layer: Layer | None
    detail: str
    tried: dict[str, str] = Field(default_factory=dict)
    policy: str = ""  # describe_policy(): the line the run report prints


class CommandResult(BaseModel):
    """The outcome of one sandboxed command."""

    argv: list[str]
    exit_code: int
    timed_out: bool
    output: str
    output_bytes: int
    truncated: bool
    log_path: str | None
    layer: Layer
    seconds: float
    limit: LimitHit | None = None
    limit_detail: str = ""


def _secret_like(name: str) -> bool:
    upper = name.upper()
    return upper.startswith(_DENIED_PREFIXES) or any(m in upper for m in _DENIED_MARKERS)


def sandbox_env(
    base: Mapping[str, str], *, home: str = "/tmp", allow: Sequence[str] = ()
) -> dict[str, str]:
    """The command environment, from an allow-list of ``base`` (the user's ``PATH`` as it is);
    secret-like names never pass; caches and home in the private ``home``."""
    # The user's PATH, never this process's venv put first (sandbox/user_env.py).
    env = {
        "PATH": base.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "TERM": "dumb",
        # The tree is read-only: pytest's cache would only warn on every run.
        "PYTEST_ADDOPTS": "-p no:cacheprovider",
        **cache_env(home),  # mypy, ruff, hypothesis: a writable cache under the private /tmp
    }
    if "VIRTUAL_ENV" in base:
        env["VIRTUAL_ENV"] = base["VIRTUAL_ENV"]
    for name in allow:
        if name in base and not _secret_like(name):
            env[name] = base[name]
    return env


def _wrap(
    layer: Layer,
    argv: Sequence[str],
    view: SandboxView,
    env: Mapping[str, str],
    policy: SandboxPolicy,
    uid: int,
    private_tmp: Path | None,
    network: bool = False,
) -> list[str]:
    if layer == "bwrap":
        return bwrap_argv(argv, view, env, policy.limits, uid, policy.bwrap_binary, network=network)
    if layer == "landlock":
        _landlock_can_run(view, network)
        writable = [*view.writable, *([private_tmp] if private_tmp else [])]
        return landlock.launcher_argv(
            argv,
            readable=view.readable,
            writable=writable,
            hidden=view.masked,
            rlimits=rlimits(policy.limits),
        )
    return list(argv)


def _landlock_can_run(view: SandboxView, network: bool) -> None:
    """Landlock rules only add access: a writable tree cannot keep a masked path unreadable,
    and its seccomp filter has no network mode. Refuse rather than weaken the view."""
    if network:
        raise RunError(
            "--allow-setup-network needs the bwrap sandbox: the Landlock layer has no network mode"
        )
    for tree in view.writable:
        hidden = [m for m in view.masked if m.is_relative_to(tree) and m.name != ".git"]
        if hidden:
            raise RunError(
                f"the Landlock layer cannot hide {hidden[0]} inside the writable tree {tree} "
                "(secret or internal paths in a setup command's worktree need the bwrap sandbox)"
            )


_PROBE_SCRIPT = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.mount(None, b"/", None, 32 | 4096, None) == 0: sys.exit("remount of / succeeded")
try:
    open(os.path.join(sys.argv[1], "probe"), "w")
    sys.exit("wrote to a read-only tree")
except OSError: pass
open(os.path.join(sys.argv[2], "probe"), "w").close()
"""

_probe_lock = threading.Lock()
_probed: dict[tuple[str, int, str], tuple[bool, str, int]] = {}


def _probe(layer: SandboxLayer, policy: SandboxPolicy) -> tuple[bool, str, int]:
    """Run the escape checks inside ``layer`` once per process: (works, detail, uid)."""
    key = (layer, policy.sandbox_uid, policy.bwrap_binary)
    with _probe_lock:
        if key not in _probed:
            _probed[key] = _probe_uncached(layer, policy)
        return _probed[key]


def _probe_uncached(layer: SandboxLayer, policy: SandboxPolicy) -> tuple[bool, str, int]:
    if layer == "bwrap" and host_tool(policy.bwrap_binary) is None:
        return False, f"{policy.bwrap_binary} not installed", 0
    if layer == "landlock" and (abi := landlock.abi_version()) < landlock.MIN_ABI:
        return False, f"Landlock ABI {abi} < {landlock.MIN_ABI} (no network restriction)", 0
    if layer == "landlock" and not landlock.seccomp_supported():
        return False, f"no seccomp syscall table for {os.uname().machine}", 0
    with tempfile.TemporaryDirectory(prefix="anti-sprawl-probe-") as tmp:
        ro, rw = Path(tmp, "ro"), Path(tmp, "rw")
        ro.mkdir()
        rw.mkdir()
        for p in (Path(tmp), ro):
            p.chmod(0o755)
        argv = [sys.executable, "-I", "-S", "-c", _PROBE_SCRIPT, str(ro), str(rw)]
        env = sandbox_env({})
        view = build_view(policy, ro, argv[0], env, writable=[rw])
        uids = (policy.sandbox_uid,) if os.geteuid() == 0 else _USERNS_UIDS
        problems: list[str] = []
        for uid in uids if layer == "bwrap" else (0,):
            full = _wrap(layer, argv, view, env, policy, uid, None)
            try:
                with handed_over([rw], uid, layer):
                    proc = subprocess.run(
                        full, capture_output=True, timeout=_PROBE_TIMEOUT, env=env, check=False
                    )
            except (OSError, subprocess.TimeoutExpired) as exc:
                problems.append(f"{type(exc).__name__}: {exc}")
                continue
            if proc.returncode == 0 and (rw / "probe").exists():
                if layer == "bwrap":
                    return True, f"bwrap, uid {uid}", uid
                return True, f"landlock ABI {landlock.abi_version()} + seccomp", uid
            problems.append(proc.stderr.decode("utf-8", "replace").strip()[-300:] or "failed")
        return False, "; ".join(problems), 0


def probe_sandbox(policy: SandboxPolicy | None = None) -> SandboxInfo:
    """The layer ``policy`` asks for, if it works here (for the run report and the refusal)."""
    policy = policy or SandboxPolicy()
    tried: dict[str, str] = {}
    for layer in policy.layers:
        works, detail, _uid = _probe(layer, policy)
        tried[layer] = detail
        if works:
            text = describe_policy(policy, layer)
            return SandboxInfo(layer=layer, detail=detail, tried=tried, policy=text)
    if policy.allow_unsandboxed:
        return SandboxInfo(
            layer="none",
            detail="UNSANDBOXED (explicitly allowed)",
            tried=tried,
            policy=describe_policy(policy, "none"),
        )
    return SandboxInfo(layer=None, detail="no sandbox layer works", tried=tried)


def unavailable_message(info: SandboxInfo) -> str:
    """Why commands are refused, with the install hint (one line)."""
    tried = "; ".join(f"{k}: {v}" for k, v in info.tried.items()) or "none enabled"
    return (
        f"no sandbox for test commands ({tried}); {INSTALL_HINT}, or opt in to the weaker "
        "'--sandbox landlock', or pass --allow-unsandboxed to run them unconfined (unsafe)"
    )


def umask_problem(info: SandboxInfo) -> str | None:
    """Why worktrees made now would be unreadable by the sandbox user, if they would be."""
    if info.layer != "bwrap" or os.geteuid() != 0:
        return None
    mask = os.umask(0o022)
    os.umask(mask)
    if mask & 0o005:
        return (
            f"the umask {mask:03o} makes new worktrees unreadable by the sandbox user; "
            "run anti-sprawl with 'umask 022'"
        )
    return None


def _readable_by_sandbox(view: SandboxView, layer: Layer, uid: int) -> None:
    if layer != "bwrap" or os.geteuid() != 0:
        return
    mode = view.workdir.stat().st_mode
    if mode & 0o005 != 0o005:
        raise RunError(
            f"{view.workdir} is not readable by the sandbox user (uid {uid}); anti-sprawl "
            "must create worktrees under umask 022 (run it with 'umask 022')"
        )
    for tree in view.content:
        if tree != view.workdir and tree.stat().st_mode & 0o005 != 0o005:
            raise RunError(
                f"{tree} is not readable by the sandbox user (uid {uid}): a command naming it "
                f"(e.g. {{checkout}}) needs it world-readable ('chmod o+rx {tree}')"
            )


def run_command(
    argv: Sequence[str],
    cwd: Path,
    *,
    timeout: float,
    writable: Sequence[Path] = (),
    policy: SandboxPolicy,
    readable: Sequence[Path] = (),
    log_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    redact: Callable[[str], str] = str,
    network: bool = False,
    unscanned: Sequence[Path] = (),
) -> CommandResult:
    """Run ``argv`` in ``cwd`` under the policy's sandbox layer.

    The command sees the allow-list view (``build_view``): ``cwd`` read-only, the toolchain,
    ``readable`` trees (masked like ``cwd``) and ``writable`` trees; the host network only
    with ``network`` (a setup command under ``--allow-setup-network``). ``env`` (default: this
    process's environment) is only a source for the allow-list. Full output goes to
    ``log_path``; both it and the returned output pass through ``redact`` first: the raw
    stream is held in memory (in an unlinked temporary file beyond 1 MiB), so no unredacted
    copy is ever on disk under a name.
    """
    if not argv:
        raise RunError("empty command")
    info = probe_sandbox(policy)
    if info.layer is None:
        raise SandboxUnavailable(f"refusing to run {argv[0]!r}: " + unavailable_message(info))
    layer: Layer = info.layer
    base = os.environ if env is None else env
    private = None if layer == "bwrap" else Path(tempfile.mkdtemp(prefix="anti-sprawl-tmp-"))
    home = "/tmp" if private is None else str(private)
    cmd_env = sandbox_env(base, home=home, allow=policy.env_allow)
    uid = _probe(layer, policy)[2] if layer != "none" else 0
    if layer == "none":  # the user's explicit unsafe choice: nothing to bind or mask
        view = SandboxView(workdir=cwd.resolve(), writable=[p.resolve() for p in writable])
    else:
        view = build_view(
            policy,
            cwd,
            argv[0],
            cmd_env,
            readable=readable,
            writable=writable,
            network=network,
            executables=named_paths(argv[1:], cwd),
            unscanned=unscanned,
        )
    _readable_by_sandbox(view, layer, uid)
    full = _wrap(layer, argv, view, cmd_env, policy, uid, private, network)
    cap_log: IO[bytes] | None = None
    start = time.monotonic()
    try:
        if log_path is not None:
            cap_log = tempfile.SpooledTemporaryFile(  # noqa: SIM115
                _SPOOL_BYTES, prefix="anti-sprawl-log-"
            )
        cap = OutputCapture(policy.output_limit, cap_log, policy.limits.output_bytes)
        with handed_over(view.writable, uid, layer):
            code, ended = execute(full, view.workdir, cmd_env, timeout, cap)
        if cap_log is not None and log_path is not None:
            cap_log.seek(0)
            raw = cap_log.read().decode("utf-8", "replace")
            # An artifact like the others (agent/artifacts.py): whole or absent after a kill,
            # no fsync (~5 ms of wall time each on the shared VM, and it stalls other
            # threads' file creation behind the journal commit it forces).
            atomic_write_text(log_path, redact(raw), durable=False)
    finally:
        if cap_log is not None:
            cap_log.close()
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)
    output = redact(cap.text(log_path))
    limit, detail = limit_hit(code, ended, output, policy.limits, timeout)
    if detail:
        output += f"\n[anti-sprawl: {detail}]\n"
    return CommandResult(
        argv=list(argv),
        exit_code=code,
        timed_out=ended == "timeout",
        output=output,
        output_bytes=cap.total,
        truncated=cap.total > len(cap.head) + len(cap.tail),
        log_path=str(log_path) if log_path else None,
        layer=layer,
        seconds=round(time.monotonic() - start, 3),
        limit=limit,
        limit_detail=detail,
    )
