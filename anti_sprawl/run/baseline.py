"""The plan's test commands as the user's environment runs them, checked before spending.

``describe_commands`` says, per distinct test command, which executable it starts on the
user's ``PATH`` (sandbox/user_env.py) and offers the checkout's virtualenv when the command
does not use it: ``execute --dry-run`` and ``validate --repo`` print it, so nobody has to
guess which ``python`` a node runs.

``check_baselines`` runs each distinct test command once at the start commit, in a throwaway
worktree and the run's own sandbox (after the plan's setup command, as a node would), and
caches the outcome per command, setup, commit, ``PATH`` and write scopes under
``.anti-sprawl/baseline/``: it *passes*, *fails* with N failures (named;
run/test_failures.py), or *cannot start* (with a hint: a src layout wants ``PYTHONPATH=src``,
the project's venv is ``{checkout}/.venv``; a test file or conftest pytest cannot collect,
which no node writes, is named, with the import that failed if one did). A command that
cannot start refuses the run before any model call (``TestsCannotStart``, exit 1, one line per
command) and is not cached, so it runs again once the user has fixed it; a failing one is a
warning, and nodes are then judged only on the failures they introduce (``known_failures``,
run/node_commands.py). Issue 24: attrs cost two paid attempts on a ``No module named 'attr'``
that this finds for free; the attrs 26.1.0 and click 8.5.1 sdists (2026-12-03) showed a test
file's failed import refused whoever wrote it, and a cached refusal outlive its fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shlex
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..errors import RunError
from ..fs.files import atomic_write_text
from ..fs.scopes import Scope
from ..git.layout import StateLayout
from ..git.workspace import Workspace
from ..plan.model import Plan, command_argv
from ..sandbox.command_template import bind_command, expand
from ..sandbox.sandbox import run_command
from ..sandbox.user_env import (
    VENV_NAMES,
    ProgramInfo,
    describe_program,
    shim_target,
    venv_command,
    venv_offer,
)
from .settings import RunSettings
from .setup_step import run_setup
from .test_failures import cannot_start, collection_errors, failing_tests, missing_module

__all__ = [
    "Baseline",
    "TestsCannotStart",
    "baseline_for",
    "check_baselines",
    "command_key",
    "describe_commands",
    "known_failures",
    "plan_test_commands",
    "refuse_unstartable",
    "run_at",
    "shown",
]


def command_key(argv: list[str]) -> str:
    """The identity of a command template (what baselines and known failures are keyed by)."""
    return json.dumps(argv)


_PLAIN = re.compile(r"[\w@%+=:,./{}-]+")


def shown(argv: list[str]) -> str:
    """A command as a person would type it (``{checkout}`` left unquoted, as plans write it)."""
    return " ".join(arg if _PLAIN.fullmatch(arg) else shlex.quote(arg) for arg in argv)


def plan_test_commands(plan: Plan) -> list[list[str]]:
    """Each distinct test command of the plan's nodes (templates), in plan order."""
    found: dict[str, list[str]] = {}
    for node in plan.tasks:
        argv = plan.test_command_for(node)
        if argv:
            found.setdefault(command_key(argv), argv)
    return list(found.values())


def describe_commands(plan: Plan, checkout: Path, env: Mapping[str, str]) -> list[str]:
    """One line per test command (what it runs), and a line offering the project's venv."""
    lines: list[str] = []
    for argv in plan_test_commands(plan):
        program = describe_program(expand(argv, {"checkout": str(checkout)}), env, checkout)
        lines.append(f"test command '{shown(argv)}' runs {program.describe()}")
        name = program.program
        if name.split("/")[0] in VENV_NAMES and program.resolved:
            lines.append(
                f"note: {name} is looked up in each node's worktree, which holds only committed "
                f"files, so a git-ignored {name} of the checkout is not there: write "
                f"{{checkout}}/{name}"
            )
        src_layout = bool(_src_packages(checkout))
        offer = venv_offer(argv, checkout, ["PYTHONPATH=src"] if src_layout else [])
        if offer:
            lines.append(f"note: {offer}")
        if src_layout and not any("PYTHONPATH" in arg for arg in argv):
            lines.append(
                f"note: a src layout ({', '.join(_src_packages(checkout))}): without "
                f"'env PYTHONPATH=src {shown(argv)}' the tests import an installed copy, if "
                "any, not the worktree's code"
            )
    return lines


def _src_packages(checkout: Path) -> list[str]:
    """Packages under ``src/`` (a src layout), by name."""
    src = checkout / "src"
    if not src.is_dir():
        return []
    return sorted(p.parent.name for p in src.glob("*/__init__.py"))


# --- the baseline: each test command once at the start commit ------------------------------

BaselineStatus = Literal["passes", "fails", "cannot_start"]
_SHOWN_FAILURES = 5


class Baseline(BaseModel):
    """One test command's outcome at the start commit, in the run's sandbox (cached on disk)."""

    command: list[str]  # the template, as the plan writes it
    commit: str
    status: BaselineStatus
    exit_code: int | None
    failures: list[str] = Field(default_factory=list)  # pytest's failing ids
    program: str = ""  # ProgramInfo.describe()
    reason: str = ""  # why it cannot start
    hint: str = ""
    tail: str = ""
    log: str = ""

    def line(self, known: Collection[str] = ()) -> str:
        """The one line a person reads about it."""
        where = f"'{shown(self.command)}' at {self.commit[:12]}"
        if self.status == "passes":
            return f"baseline: {where} passes ({self.program})"
        if self.status == "cannot_start":
            hint = f"; {self.hint}" if self.hint else ""
            return f"test command {where} cannot start: {self.reason} ({self.program}){hint}"
        if not self.failures:
            return (
                f"warning: baseline: {where} fails (exit code {self.exit_code}) and names no "
                "failing test, so nodes are judged by its exit code: each must make it pass; "
                f"log: {self.log}"
            )
        marked = [f for f in self.failures if f in known]
        listed = ", ".join(self.failures[:_SHOWN_FAILURES])
        more = len(self.failures) - _SHOWN_FAILURES
        listed += f" and {more} more" if more > 0 else ""
        note = f" ({len(marked)} marked known_failures in the plan)" if marked else ""
        stops = ""
        if any(a in ("-x", "--exitfirst") or a.startswith("--maxfail") for a in self.command):
            # attrs 26.1.0 with -x: every node's run would stop at the known failure, excused,
            # and the tests after it would never run (issue 24's checks, 2026-12-03)
            stops = (
                "; the command stops at the first failure, so no test after a known one runs "
                "in any node: drop -x (or --maxfail), or deselect them (--deselect ID)"
            )
        return (
            f"warning: baseline: {where} fails with {len(self.failures)} failure(s){note}: "
            f"{listed}; nodes fail on tests only for failures they introduce{stops}; "
            f"log: {self.log}"
        )


class TestsCannotStart(RunError):
    """A test command fails before any test runs at the start commit: no node could pass it."""

    __test__ = False
    multiline = True  # cli/output.py prints every line: one per command


def _write_entries(plan: Plan) -> list[str]:
    """Every write-scope entry of the plan's nodes, in plan order."""
    return [entry for node in plan.tasks for entry in node.write_scope]


def _key(argv: list[str], plan: Plan, commit: str, env: Mapping[str, str]) -> str:
    setup = command_argv(plan.setup_command) or []
    # the verdict reads the write scopes too (a module or a test file a node will write)
    writes = sorted(set(_write_entries(plan)))
    text = json.dumps(
        [argv, setup, commit, env.get("PATH", ""), env.get("VIRTUAL_ENV", ""), writes]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _hint(argv: list[str], checkout: Path, program: ProgramInfo, missing: str | None) -> str:
    """What to change in the command: the interpreter a pyenv shim picks, a src layout's
    ``PYTHONPATH=src``, the project's venv; ends with one command to try when there is one.
    ``missing``: the module the tests could not import."""
    module = missing or ""
    hints, fixed = _program_hints(argv, checkout, program, module)
    top = module.split(".")[0]
    src_layout = bool(_src_packages(checkout)) or (checkout / "src" / f"{top}.py").is_file()
    if src_layout and not any("PYTHONPATH" in a for a in fixed):
        hints.append("a src layout wants PYTHONPATH=src")
        fixed = ["env", "PYTHONPATH=src", *fixed]
    wants = ["PYTHONPATH=src"] if src_layout else []
    with_venv = venv_command(argv, checkout, wants)
    if fixed != argv:
        hints.append(f"try test_command: '{shown(fixed)}'")
        if with_venv and with_venv != shown(fixed):
            hints.append(f"or, with the checkout's virtualenv: '{with_venv}'")
    elif with_venv:
        hints.append(
            f"try test_command: '{with_venv}' (the checkout's virtualenv; anti-sprawl never "
            "switches to it on its own)"
        )
    elif not hints:
        hints.append("name the program with a full path, or {checkout}/<venv>/bin/<program>")
    return "; ".join(hints)


def _program_hints(
    argv: list[str], checkout: Path, program: ProgramInfo, module: str
) -> tuple[list[str], list[str]]:
    """What is wrong with the program the command names, and the command with it mended:
    a relative path (commands run in a worktree of committed files only), a pyenv shim, an
    interpreter without the module it runs or the tests import."""
    fixed = list(argv)
    relative = "/" in program.program and not program.program.startswith("/")
    if relative and program.resolved is None and (checkout / program.program).exists():
        note = f"{program.program} is looked up in the worktree, which has only committed files"
        return [note], [f"{{checkout}}/{a}" if a == program.program else a for a in fixed]
    if program.resolved and "/shims/" in program.resolved:
        target = shim_target(Path(program.resolved), checkout)
        if target is not None:
            fixed = [target if a == program.program else a for a in fixed]
        return ["it is a pyenv shim, which cannot run in the sandbox"], fixed
    if module and module == program.module:
        return [f"{program.resolved} has no {module} installed"], fixed
    if module and program.resolved and not _src_top(checkout, module):
        return [
            f"the tests import {module}, which {program.resolved} cannot: install it there"
        ], fixed
    return [], fixed


def _src_top(checkout: Path, module: str) -> bool:
    """Whether ``module``'s top package is the project's own, in its ``src/`` or at its root."""
    top = module.split(".")[0]
    return any(
        (base / top).is_dir() or (base / f"{top}.py").is_file()
        for base in (checkout / "src", checkout)
    )


def _projects_own(module: str, plan: Plan, checkout: Path) -> bool:
    """``module`` is the project's, not the environment's: a package at the checkout's root
    or under its ``src/`` that only lacks this submodule (``pkg.c`` with ``pkg/`` there), or a
    path the plan's write scopes will create (at the root or under ``src/``)."""
    parts = module.split(".")
    if len(parts) > 1 and any((base / parts[0]).is_dir() for base in (checkout, checkout / "src")):
        return True
    path = "/".join(parts)
    bases = (checkout, checkout / "src")
    if any((b / f"{path}.py").exists() or (b / path).is_dir() for b in bases):
        return False  # there already, and still not importable: the environment's doing
    written = [entry.lstrip("/").removeprefix("src/") for entry in _write_entries(plan)]
    return any(entry.startswith((f"{path}.py", f"{path}/")) for entry in written)


def _about_program(reason: str, module: str | None) -> bool:
    """Whether ``reason`` is about the program or its modules, what ``_hint`` advises on (a
    usage error, or a file pytest cannot collect for another reason than an import, is in the
    log, shown with the tail)."""
    return bool(module) or not reason.startswith("pytest ")


def _uncollectable(
    files: list[str], plan: Plan, worktree: Path, module: str | None = None
) -> str | None:
    """Why no node could pass: pytest cannot collect ``files`` and no node writes any of them
    (a node that writes one may be there to fix it); None otherwise. ``module``: the import
    that failed, when it was one (named in the reason)."""
    if not files:
        return None
    prefix = str(worktree).rstrip("/") + "/"
    relative = [f.removeprefix(prefix) for f in files]
    if any(path.startswith("/") for path in relative):
        return None  # a path outside the worktree: nothing says which file it is
    writes = Scope(_write_entries(plan))
    if any(writes.matches(path) for path in relative):
        return None
    more = f" and {len(relative) - 1} more" if len(relative) > 1 else ""
    because = f": No module named '{module}'" if module else ""
    return f"pytest cannot collect {relative[0]}{more}, which no node writes{because}"


def run_at(
    argv: list[str],
    plan: Plan,
    checkout: Path,
    commit: str,
    settings: RunSettings,
    log: Path,
    redact: Callable[[str], str],
    worktree: str = "",
) -> Baseline:
    """``argv`` once at ``commit`` (never cached), the way every baseline runs: a fresh
    worktree (named ``worktree``, or after the log), the plan's setup command, the run's
    sandbox; output to ``log``. ``baseline_for`` caches it; the integration check and its
    bisection (run/integration.py) call it directly."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = settings.command_env or {}
    layout = StateLayout.ensured(checkout)
    name = worktree or f"baseline-{log.stem[:16]}"
    with Workspace.create(checkout, layout.worktrees, name, commit) as ws:
        expanded = expand(argv, {"checkout": str(checkout)})
        program = describe_program(expanded, env, ws.path)
        setup = command_argv(plan.setup_command)
        if setup:
            done = run_setup(
                ws,
                setup,
                checkout=checkout,
                policy=settings.sandbox,
                timeout=settings.test_timeout,
                log=log.with_suffix(".setup.log"),
                env=env,
                redact=redact,
            )
            if not done.outcome.passed:
                return Baseline(
                    command=argv,
                    commit=commit,
                    status="cannot_start",
                    exit_code=done.outcome.exit_code,
                    program=program.describe(),
                    reason=f"the setup_command fails (exit code {done.outcome.exit_code})",
                    hint=f"see {log.with_suffix('.setup.log')}",
                    tail=done.outcome.tail,
                    log=str(log.with_suffix(".setup.log")),
                )
        bound = bind_command(argv, checkout, ws.path)
        res = run_command(
            bound.argv,
            ws.path,
            timeout=settings.test_timeout,
            readable=bound.readable,
            unscanned=bound.unscanned,
            policy=settings.sandbox,
            log_path=log,
            env=env,
            redact=redact,
        )
    full = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else res.output
    why = cannot_start(res.exit_code, full)
    module = missing_module(full) if why and why.startswith("No module") else None
    uncollected = collection_errors(res.exit_code, full)
    if module and _projects_own(module, plan, checkout):
        why = None  # code the plan is to write (a test-first command): a plain failure
    elif module and uncollected and not _src_top(checkout, module):
        why = None  # another import a test file or conftest makes: judged as that file
    if why is None and res.exit_code != 0:
        why = _uncollectable(uncollected, plan, ws.path, module)
    status: BaselineStatus = "passes" if res.exit_code == 0 else "cannot_start" if why else "fails"
    return Baseline(
        command=argv,
        commit=commit,
        status=status,
        exit_code=res.exit_code,
        failures=failing_tests(full) if status == "fails" else [],
        program=program.describe(),
        reason=why or "",
        hint=(
            _hint(argv, checkout, program, module) if _about_program(why, module) else f"see {log}"
        )
        if why
        else "",
        tail="\n".join(res.output.splitlines()[-20:]),
        log=str(log),
    )


def check_baselines(
    plan: Plan,
    checkout: Path,
    commit: str,
    settings: RunSettings,
    redact: Callable[[str], str] = str,
) -> list[Baseline]:
    """Each distinct test command once at ``commit`` (cached per command, setup, commit and
    PATH under ``.anti-sprawl/baseline/``); nothing else is left behind."""
    return [
        baseline_for(argv, plan, checkout, commit, settings, redact)
        for argv in plan_test_commands(plan)
    ]


def baseline_for(
    argv: list[str],
    plan: Plan,
    checkout: Path,
    commit: str,
    settings: RunSettings,
    redact: Callable[[str], str] = str,
) -> Baseline:
    """One command's outcome at ``commit``, from the cache when it ran there before and
    could start."""
    env = settings.command_env or {}
    cache = StateLayout.ensured(checkout).baseline(_key(argv, plan, commit, env))
    if cache.is_file():
        with contextlib.suppress(OSError, ValueError):
            return Baseline.model_validate_json(cache.read_text(encoding="utf-8"))
    done = run_at(argv, plan, checkout, commit, settings, cache.with_suffix(".log"), redact)
    if done.status != "cannot_start":
        # a command that cannot start is what the user fixes next (installs a module, names
        # another interpreter), in ways the key cannot see: it is run again the next time
        atomic_write_text(cache, done.model_dump_json(indent=2))
    return done


def refuse_unstartable(baselines: list[Baseline]) -> None:
    """TestsCannotStart, one line per command that cannot start, when any cannot."""
    broken = [b.line() for b in baselines if b.status == "cannot_start"]
    if broken:
        raise TestsCannotStart("\n".join(broken))


def known_failures(baselines: list[Baseline], plan: Plan) -> dict[str, frozenset[str]]:
    """Per command: the tests nodes are not failed for (failing at the start, or marked)."""
    marked = frozenset(plan.known_failures)
    return {command_key(b.command): frozenset(b.failures) | marked for b in baselines}
