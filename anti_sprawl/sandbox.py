"""Running a node's commands read-only, without network, with a scrubbed environment.

File-tool rules do not bind a shell (SECURITY.md, P10), so commands run under an OS sandbox:
bubblewrap when it works (an unprivileged uid in a user namespace with every capability
dropped; new net/pid/ipc/uts namespaces; ``/`` read-only; private ``/tmp``; host secrets
masked), else Landlock (:mod:`.landlock`), else nothing only when the user passed the
explicit unsafe flag. The environment is built from an allow-list, never by filtering
(SL-5). A timeout kills the whole process group; output is kept as head + tail.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict, Field

from . import landlock
from .errors import RunError
from .execution import OutputCapture, execute
from .plan import atomic_write_text

__all__ = [
    "CommandResult",
    "Layer",
    "SandboxInfo",
    "SandboxPolicy",
    "SandboxUnavailable",
    "hidden_paths",
    "probe_sandbox",
    "run_command",
    "sandbox_env",
]

Layer = Literal["bwrap", "landlock", "none"]
SandboxLayer = Literal["bwrap", "landlock"]
_BWRAP_UIDS = (65534, 1000)
_PROBE_TIMEOUT = 15.0
_DENIED_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
_DENIED_PREFIXES = ("ANTHROPIC_", "OPENAI_", "AWS_", "GITHUB_", "GH_", "AZURE_", "GOOGLE_")
_HOME_SECRETS = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".docker",
    ".kube",
    ".npmrc",
    ".pypirc",
    ".azure",
    ".password-store",
    ".config/gh",
    ".config/gcloud",
    ".config/anti-sprawl",
    ".local/share/keyrings",
)
_SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/ssh", "/run", "/var/run")


class SandboxUnavailable(RunError):
    """No sandbox layer works here and running unsandboxed was not allowed."""


class SandboxPolicy(BaseModel):
    """How commands are confined; built once from settings and passed down."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow_unsandboxed: bool = Field(
        default=False, description="The user's explicit unsafe flag: run with no OS sandbox."
    )
    layers: tuple[SandboxLayer, ...] = Field(
        default=("bwrap", "landlock"), description="Layers to try, strongest first."
    )
    output_limit: int = Field(
        default=64 * 1024, ge=1024, description="Bytes of output kept (half head, half tail)."
    )
    env_allow: tuple[str, ...] = Field(
        default=(), description="Extra variable names to pass through (secret-looking ones never)."
    )


class SandboxInfo(BaseModel):
    """Which layer commands will use here, and why the stronger ones did not work."""

    layer: Layer | None
    detail: str
    tried: dict[str, str] = Field(default_factory=dict)


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


def _secret_like(name: str) -> bool:
    upper = name.upper()
    return upper.startswith(_DENIED_PREFIXES) or any(m in upper for m in _DENIED_MARKERS)


def sandbox_env(
    base: Mapping[str, str], *, home: str = "/tmp", allow: Sequence[str] = ()
) -> dict[str, str]:
    """The command environment, from an allow-list of ``base``; secret-like names never pass."""
    path = base.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    if sys.prefix != sys.base_prefix:
        # The orchestrator's own venv, so `pytest` resolves even when it was not activated.
        path = f"{Path(sys.prefix) / 'bin'}:{path}"
    env = {
        "PATH": path,
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "TERM": "dumb",
        # The tree is read-only: pytest's cache would only warn on every run.
        "PYTEST_ADDOPTS": "-p no:cacheprovider",
    }
    if "VIRTUAL_ENV" in base:
        env["VIRTUAL_ENV"] = base["VIRTUAL_ENV"]
    for name in allow:
        if name in base and not _secret_like(name):
            env[name] = base[name]
    return env


def hidden_paths() -> list[Path]:
    """Existing host paths that hold secrets or sockets; masked inside the sandbox."""
    homes = {Path("/root"), Path(pwd.getpwuid(os.getuid()).pw_dir)}
    candidates = [Path(p) for p in _SYSTEM_SECRETS]
    candidates += [h / name for h in sorted(homes) for name in _HOME_SECRETS]
    out = []
    for p in candidates:
        if p.is_symlink():
            continue  # /var/run -> /run: masking the target covers it
        if p.exists():
            out.append(p)
    return out


def _bwrap_argv(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    uid: int,
    readable: Sequence[Path],
    writable: Sequence[Path],
) -> list[str]:
    bwrap = shutil.which("bwrap") or "bwrap"
    out = [bwrap, "--unshare-user", "--uid", str(uid), "--gid", str(uid), "--cap-drop", "ALL"]
    out += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    out += ["--die-with-parent", "--new-session", "--clearenv"]
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for p in hidden_paths():
        out += ["--tmpfs", str(p)] if p.is_dir() else ["--ro-bind", "/dev/null", str(p)]
    # /tmp is now empty: bring back the trees the command needs (tests keep repos in /tmp,
    # and a fresh clone's virtualenv may live there too).
    for p in dict.fromkeys([cwd, *readable, *_toolchain_under_tmp(env)]):
        out += ["--ro-bind", str(p), str(p)]
    for p in writable:
        out += ["--bind", str(p), str(p)]
    out += ["--chdir", str(cwd)]
    for key, value in env.items():
        out += ["--setenv", key, value]
    return [*out, "--", *argv]


def _toolchain_under_tmp(env: Mapping[str, str]) -> list[Path]:
    """Interpreter prefixes and PATH entries that live under /tmp, which bwrap hides."""
    tmp = Path("/tmp")
    candidates = [sys.prefix, sys.base_prefix, env.get("VIRTUAL_ENV", "")]
    candidates += env.get("PATH", "").split(os.pathsep)
    out: list[Path] = []
    for raw in candidates:
        if not raw or not os.path.isabs(raw):
            continue
        path = Path(os.path.realpath(raw))
        if path.is_dir() and path.is_relative_to(tmp) and path != tmp:
            out.append(path)
    return out


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
_probed: dict[str, tuple[bool, str, int]] = {}


def _probe(layer: SandboxLayer) -> tuple[bool, str, int]:
    """Run the escape checks inside ``layer`` once per process: (works, detail, uid)."""
    with _probe_lock:
        if layer not in _probed:
            _probed[layer] = _probe_uncached(layer)
        return _probed[layer]


def _probe_uncached(layer: SandboxLayer) -> tuple[bool, str, int]:
    if layer == "bwrap" and shutil.which("bwrap") is None:
        return False, "bwrap not installed", 0
    if layer == "landlock" and (abi := landlock.abi_version()) < landlock.MIN_ABI:
        return False, f"Landlock ABI {abi} < {landlock.MIN_ABI} (no network restriction)", 0
    if layer == "landlock" and not landlock.seccomp_supported():
        return False, f"no seccomp syscall table for {os.uname().machine}", 0
    with tempfile.TemporaryDirectory(prefix="anti-sprawl-probe-") as tmp:
        ro, rw = Path(tmp, "ro"), Path(tmp, "rw")
        ro.mkdir()
        rw.mkdir()
        argv = [sys.executable, "-I", "-S", "-c", _PROBE_SCRIPT, str(ro), str(rw)]
        env = sandbox_env({})
        problems: list[str] = []
        for uid in _BWRAP_UIDS if layer == "bwrap" else (0,):
            full = _wrap(layer, argv, ro, env, uid, [], [rw])
            try:
                proc = subprocess.run(
                    full, capture_output=True, timeout=_PROBE_TIMEOUT, env=env, check=False
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                problems.append(f"{type(exc).__name__}: {exc}")
                continue
            if proc.returncode == 0 and (rw / "probe").exists():
                detail = (
                    f"uid {uid}"
                    if layer == "bwrap"
                    else f"Landlock ABI {landlock.abi_version()} + seccomp"
                )
                return True, detail, uid
            problems.append(proc.stderr.decode("utf-8", "replace").strip()[-300:] or "failed")
        return False, "; ".join(problems), 0


def _wrap(
    layer: Layer,
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    uid: int,
    readable: Sequence[Path],
    writable: Sequence[Path],
) -> list[str]:
    if layer == "bwrap":
        return _bwrap_argv(argv, cwd, env, uid, readable, writable)
    if layer == "landlock":
        return landlock.launcher_argv(
            argv, readable=[cwd, *readable], writable=writable, hidden=hidden_paths()
        )
    return list(argv)


def probe_sandbox(policy: SandboxPolicy | None = None) -> SandboxInfo:
    """The strongest working layer under ``policy`` (for the run report)."""
    policy = policy or SandboxPolicy()
    tried: dict[str, str] = {}
    for layer in policy.layers:
        works, detail, _uid = _probe(layer)
        tried[layer] = detail
        if works:
            return SandboxInfo(layer=layer, detail=detail, tried=tried)
    if policy.allow_unsandboxed:
        return SandboxInfo(layer="none", detail="UNSANDBOXED (explicitly allowed)", tried=tried)
    return SandboxInfo(layer=None, detail="no sandbox layer works", tried=tried)


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
) -> CommandResult:
    """Run ``argv`` in ``cwd`` under the strongest working sandbox layer.

    Everything is read-only except ``writable``; ``readable`` adds trees the command must see
    when they live under a hidden path such as ``/tmp``. ``env`` (default: this process's
    environment) is only a source for the allow-list. Full output goes to ``log_path``, and
    both it and the returned output pass through ``redact`` first: the raw stream is held in an
    unlinked temporary file, so no unredacted copy is ever visible on disk.
    """
    if not argv:
        raise RunError("empty command")
    info = probe_sandbox(policy)
    if info.layer is None:
        tried = "; ".join(f"{k}: {v}" for k, v in info.tried.items()) or "none enabled"
        raise SandboxUnavailable(
            f"refusing to run {argv[0]!r} without a sandbox (tried {tried}); "
            "allow unsandboxed commands explicitly to run anyway"
        )
    layer: Layer = info.layer
    cwd = cwd.resolve()
    base = os.environ if env is None else env
    private = None if layer == "bwrap" else Path(tempfile.mkdtemp(prefix="anti-sprawl-tmp-"))
    home = "/tmp" if private is None else str(private)
    cmd_env = sandbox_env(base, home=home, allow=policy.env_allow)
    uid = _probe(layer)[2] if layer != "none" else 0
    rw = [p.resolve() for p in writable] + ([private] if private else [])
    full = _wrap(layer, argv, cwd, cmd_env, uid, [p.resolve() for p in readable], rw)
    cap_log: IO[bytes] | None = None
    start = time.monotonic()
    try:
        if log_path is not None:
            cap_log = tempfile.TemporaryFile(prefix="anti-sprawl-log-")  # noqa: SIM115
        cap = OutputCapture(policy.output_limit, cap_log)
        code, timed_out = execute(full, cwd, cmd_env, timeout, cap)
        if cap_log is not None and log_path is not None:
            cap_log.seek(0)
            raw = cap_log.read().decode("utf-8", "replace")
            atomic_write_text(log_path, redact(raw))
    finally:
        if cap_log is not None:
            cap_log.close()
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)
    return CommandResult(
        argv=list(argv),
        exit_code=code,
        timed_out=timed_out,
        output=redact(cap.text(log_path)),
        output_bytes=cap.total,
        truncated=cap.total > len(cap.head) + len(cap.tail),
        log_path=str(log_path) if log_path else None,
        layer=layer,
        seconds=round(time.monotonic() - start, 3),
    )
