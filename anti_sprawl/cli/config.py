"""Config files, so a user does not retype ``--provider``, ``--model``, ``--jobs`` every time.

Values flow one way (docs/STYLE habit 6): built-in defaults < the user's file
(``$XDG_CONFIG_HOME/anti-sprawl/config.toml``, else ``~/.config/...``) < the project's file
(``.anti-sprawl.toml`` at the repository root, else ``[tool.anti-sprawl]`` in its
``pyproject.toml``) < environment variables an option reads < flags. The files become Click's
``default_map`` for each command that has a parameter of that name (cli/app.py installs it),
so options resolve exactly as before, only with other defaults; ``--help`` shows them and
says which file set them, and ``doctor`` lists every value with its source.

The project's root is the ``--repo`` on the command line, else the current directory's git
root. Keys and tokens are never read from a config file (a repository's file is not the
user's to trust with them): a key-like name is an error.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import UsageError

__all__ = [
    "CONFIG_KEYS",
    "Config",
    "LoadedConfig",
    "config_lines",
    "default_map",
    "load_config",
    "project_root",
    "template",
    "user_config_path",
    "write_config",
]

PROJECT_FILE = ".anti-sprawl.toml"
PYPROJECT_TABLE = "anti-sprawl"


class Config(BaseModel):
    """What a config file may set (every field optional; unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(default=None, description="anthropic | openai | scripted")
    model: str | None = Field(default=None, description="Model name.")
    base_url: str | None = Field(default=None, description="OpenAI-compatible server URL.")
    request_timeout: float | None = Field(default=None, gt=0, description="Seconds per call.")
    test_command: str | None = Field(default=None, description="Default test command (plan).")
    jobs: int | None = Field(default=None, ge=1, le=64, description="Nodes run at once.")
    max_tokens: int | None = Field(default=None, ge=1, description="Run-wide token cap.")
    max_cost: float | None = Field(default=None, ge=0, description="Run-wide cap in dollars.")


CONFIG_KEYS = tuple(Config.model_fields)


class LoadedConfig(BaseModel):
    """The merged values, and for each the file it came from."""

    values: dict[str, Any] = Field(default_factory=dict)
    sources: dict[str, str] = Field(default_factory=dict)
    files: list[str] = Field(default_factory=list)
    ignored: list[str] = Field(default_factory=list, description="Values dropped, and why.")


def user_config_path(environ: Mapping[str, str]) -> Path | None:
    """``$XDG_CONFIG_HOME/anti-sprawl/config.toml`` (else ``~/.config/...``)."""
    home = environ.get("HOME")
    base = environ.get("XDG_CONFIG_HOME") or (f"{home}/.config" if home else None)
    return Path(base) / "anti-sprawl" / "config.toml" if base else None


def project_root(argv: Sequence[str], cwd: Path) -> Path | None:
    """The repository a command works on: ``--repo`` as given, else cwd's git root."""
    for i, arg in enumerate(argv):
        if arg == "--repo" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if arg.startswith("--repo="):
            return Path(arg.removeprefix("--repo="))
    found = _plain_git_root(cwd)
    if found is not _ASK_GIT:
        return found if isinstance(found, Path) else None
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True, check=False
    )
    return Path(top.stdout.decode().strip()) if top.returncode == 0 else None


_ASK_GIT = object()  # the walk below cannot tell what git would: run it
_DISCOVERY_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
)


def _plain_git_root(cwd: Path) -> Path | object | None:
    """cwd's git root found the way git finds it, without starting git (every command reads
    config at start-up, and a process there cost a tenth of ``--help``: issue 29, item 4):
    the nearest directory holding a ``.git`` directory with a ``HEAD``, or a ``.git`` file
    naming its ``gitdir:``, owned by this user; None when no directory up to ``/`` has one.
    ``_ASK_GIT`` for anything else (git's discovery variables set, a start inside ``.git``,
    another user's or an odd ``.git``): then git itself answers, as before."""
    if any(name in os.environ for name in _DISCOVERY_ENV):
        return _ASK_GIT
    try:
        here = cwd.resolve()
        for d in (here, *here.parents):
            if d.name == ".git":
                return _ASK_GIT
            dot = d / ".git"
            if not os.path.lexists(dot):
                continue
            if dot.stat().st_uid != os.getuid() or d.stat().st_uid != os.getuid():
                return _ASK_GIT  # git's safe.directory rules decide
            if dot.is_dir() and (dot / "HEAD").is_file():
                return d
            if dot.is_file() and dot.read_bytes()[:8] == b"gitdir: ":
                return d
            return _ASK_GIT
    except OSError:
        return _ASK_GIT
    return None


def _read(path: Path, table: str | None) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot parse config file {path}: {exc}") from None
    if table is not None:
        data = data.get("tool", {}).get(table, {})
    for key in data:
        secret = any(word in key.lower() for word in ("key", "token", "secret", "password"))
        if secret and key != "max_tokens":
            raise UsageError(
                f"config file {path}: '{key}' looks like a secret; keys stay in "
                "the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY)"
            )
    try:
        checked = Config.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise UsageError(f"config file {path}: {where}: {first['msg']}") from None
    return checked.model_dump(exclude_none=True)


def load_config(environ: Mapping[str, str], root: Path | None) -> LoadedConfig:
    """The user's file, then the project's over it."""
    loaded = LoadedConfig()
    found: list[tuple[Path, str | None]] = []
    user = user_config_path(environ)
    if user is not None and user.is_file():
        found.append((user, None))
    if root is not None:
        if (root / PROJECT_FILE).is_file():
            found.append((root / PROJECT_FILE, None))
        elif (root / "pyproject.toml").is_file():
            found.append((root / "pyproject.toml", PYPROJECT_TABLE))
    for path, table in found:
        values = _read(path, table)
        if path != user:
            note = _untrusted_server(path, values)
            if note is not None:
                loaded.ignored.append(note)
        if values:
            loaded.files.append(str(path))
        for key, value in values.items():
            loaded.values[key] = value
            loaded.sources[key] = str(path) + (f" [tool.{table}]" if table else "")
    return loaded


def _untrusted_server(path: Path, values: dict[str, Any]) -> str | None:
    """A repository's own config may not choose the server: a cloned repository that named a
    ``base_url`` (even one on this machine) would have the user's key and code sent to it
    (docs/security.md, PI-11). The value is dropped; the note says so."""
    url = values.pop("base_url", None)
    if url is None:
        return None
    return (
        f"config file {path}: base_url {url!r} ignored: a repository's config may not choose "
        "the server that gets your key and code (set it in your user config, or pass --base-url)"
    )


def default_map(loaded: LoadedConfig, commands: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Click's ``default_map``: each value for every command with a parameter of its name."""
    return {
        name: {k: v for k, v in loaded.values.items() if k in params}
        for name, params in commands.items()
        if any(k in params for k in loaded.values)
    }


def template(scope: str) -> str:
    """A commented config file for ``anti-sprawl init`` (``project``, ``pyproject``, ``user``)."""
    header = {
        "project": "# anti-sprawl settings for this repository (flags override them).",
        "pyproject": "[tool.anti-sprawl]\n# anti-sprawl settings for this repository.",
        "user": "# anti-sprawl settings for every repository (a project's file wins).",
    }[scope]
    return f"""{header}
# Precedence: built-in defaults < user file < project file < environment < flags.
# API keys never go here: they stay in ANTHROPIC_API_KEY / OPENAI_API_KEY.

# provider = "anthropic"            # anthropic | openai | scripted
# model = "claude-sonnet-5-5"       # the model of nodes without their own
# base_url = "http://127.0.0.1:11434/v1"  # an OpenAI-compatible local server (Ollama, vLLM)
# request_timeout = 120             # seconds one model call may take
# test_command = "python -m pytest -q"    # the plan's default test command ('plan')
# jobs = 2                          # nodes run at once
# max_tokens = 2000000              # run-wide token cap
# max_cost = 5.0                    # run-wide cap in US dollars
"""


def config_lines(environ: Mapping[str, str], root: Path | None) -> list[str]:
    """Each configured value and where it came from (``doctor``)."""
    loaded = load_config(environ, root)
    if not loaded.values:
        return [*loaded.ignored, "no config file (anti-sprawl init writes one)"]
    said = [f"{k} = {v!r} (from {loaded.sources[k]})" for k, v in loaded.values.items()]
    return [*loaded.ignored, *said]


def write_config(root: Path, *, scope: str, environ: Mapping[str, str]) -> Path:
    """Write the commented template for ``scope``; never over an existing setting."""
    if scope == "user":
        target = user_config_path(environ)
        if target is None:
            raise UsageError("no $XDG_CONFIG_HOME or $HOME to put the user config under")
    elif scope == "pyproject":
        target = root / "pyproject.toml"
        text = target.read_text(encoding="utf-8") if target.is_file() else ""
        if f"[tool.{PYPROJECT_TABLE}]" in text:
            raise UsageError(f"{target} already has a [tool.{PYPROJECT_TABLE}] table")
        sep = "\n" if text and not text.endswith("\n") else ""
        target.write_text(f"{text}{sep}\n{template(scope)}", encoding="utf-8")
        return target
    else:
        target = root / PROJECT_FILE
    if target.exists():
        raise UsageError(f"{target} exists already; edit it (or remove it first)")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(template(scope), encoding="utf-8")
    return target
