"""What one ``execute``/``resume`` is told: frozen settings apart from the caller's hooks.

The CLI resolves everything once (defaults < config < environment < flags) and hands down an
``ExecuteOptions`` (node.py), which is frozen like its parts:

- ``RunSettings``: plain, frozen data (jobs, branch, sandbox policy, caps, timeouts, ablations,
  ...). Nothing changes it after construction; ``resume`` derives a copy with
  ``dataclasses.replace`` where the journal fills a gap (jobs, sparse).
- ``RunHooks``: the callbacks a caller installs: live progress, the PR body written by the views
  when a run finishes, and ``crash``, which only the test launcher sets (it kills the process at
  a named point, for the crash-safety tests; see ``CRASH_POINTS``).
- the provider, the redactor, the stop event and the job runner (``run_node_job`` here, or
  an executor's): live objects, on ``ExecuteOptions`` itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..fs.scope_grant import ScopeGrant
from ..providers.limits import default_output_limit
from ..providers.prices import PriceTable
from ..sandbox.policy import SandboxPolicy
from .ablations import Ablations
from .scope_grants import ScopeRequests

if TYPE_CHECKING:
    from ..git.layout import RunPaths
    from .journal import RunState
    from .result import TaskResult

__all__ = ["CRASH_POINTS", "LiveStep", "RunHooks", "RunSettings"]

# Named points where the test launcher's ``crash`` hook may kill the process.
CRASH_POINTS = (
    "after_llm_response",
    "mid_write",
    "before_audit",
    "before_commit",
    "after_commit_before_journal",
    "between_attempts",
    # run/integration.py: the culprit is journaled, the branch not yet rebuilt; then rebuilt,
    # the re-landed nodes' new commits not yet journaled.
    "mid_rebuild",
    "after_rebuild",
    # run/branch_order.py: the reordered commits are written, the branch not yet moved.
    "mid_reorder",
)


@dataclass(frozen=True)
class RunSettings:
    """The settings of one execute/resume, resolved once by the CLI (plain, frozen data)."""

    jobs: int = 1
    branch: str | None = None
    base: str | None = None
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    test_timeout: float = 600.0
    # Ceiling of the lean first prompt; a node's target is min(this, 40% of its token_budget).
    context_budget: int | None = None  # default: lean.LEAN_CEILING (12k)
    context_window: int = 200_000
    # Output cap of one model response (``--max-output-tokens``); None: the default of each
    # node's model (providers/limits.py), small for unknown models behind a local server.
    max_output_tokens: int | None = None
    local_server: bool = False
    # ``--request-timeout``: the overall deadline of one model call in seconds (None: the
    # default of the server kind, providers/limits.py). The provider is built with it; it is
    # recorded here so a resumed run can be given the same.
    request_timeout: float | None = None
    # After a stop (Ctrl-C), how long running nodes get to wind down before they are abandoned.
    stop_grace: float = 5.0
    # The environment of test and setup commands (None: the sandbox's minimal one).
    command_env: Mapping[str, str] | None = None
    # Per test command (run.baseline.command_key): tests failing at the start commit or marked
    # in the plan's known_failures; a node fails on tests only for others (run/baseline.py).
    known_failures: Mapping[str, frozenset[str]] = field(default_factory=dict)
    ablations: Ablations = field(default_factory=Ablations)
    # The plan's integration_command on the branch tip after the last node (``--no-integration``
    # turns it off; run/integration.py).
    integration: bool = True
    # Check out only each node's scopes plus the repository's root-level files: much faster
    # on large repositories, for test commands that need nothing else.
    sparse: bool = False
    # Run-wide caps over every model call (``--max-tokens``, ``--max-cost`` in dollars); on
    # resume, None keeps the cap the run was started with.
    max_tokens: int | None = None
    max_cost: float | None = None
    # ``--model``: the model of nodes without their own (it overrides the plan's default).
    model: str | None = None
    # Prices of the models (``--prices``, the user's config, the bundled table).
    prices: PriceTable = field(default_factory=lambda: PriceTable({}))
    # The command's options as plain JSON (cli/launch.py), kept in the journal so ``resume
    # RUN`` goes on with the same provider, server, sandbox and limits; never a key.
    launch: Mapping[str, Any] = field(default_factory=dict)
    # ``--scope-requests``: auto | ask | never (run/scope_grants.py); ``ask`` without a
    # terminal is resolved to ``never`` by the CLI before the run starts.
    scope_requests: ScopeRequests = "auto"

    def output_limit(self, provider: str, model: str) -> int:
        """The output cap of one response of ``model`` (served by ``provider``): the flag, else
        the model's default."""
        return self.max_output_tokens or default_output_limit(
            provider, model, local_server=self.local_server
        )


@dataclass(frozen=True)
class RunHooks:
    """Callbacks a caller installs; each may be None."""

    on_start: Callable[[RunState], None] | None = None
    on_event: Callable[[TaskResult], None] | None = None
    # Per model call and tool call of a running local node: where it is (live spend).
    on_live: Callable[[LiveStep], None] | None = None
    # A finished (not interrupted) run, before its lock is released: the CLI writes PR.md.
    on_finish: Callable[[RunState, RunPaths], None] | None = None
    # ``crash(point, task_id)`` at each of ``CRASH_POINTS``: set only by the test launcher.
    crash: Callable[[str, str], None] | None = None
    # ``--scope-requests ask`` on a terminal: (task id, request) -> the user's yes.
    ask_scope: Callable[[str, ScopeGrant], bool] | None = None


@dataclass(frozen=True)
class LiveStep:
    """Where a running attempt is: its calls, tool calls, tokens and dollars so far, its step."""

    task_id: str
    step: str  # "model call", "tool write_file", ...
    calls: int = 0
    tool_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
