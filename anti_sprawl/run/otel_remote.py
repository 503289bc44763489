"""A Dask node's spans in the run's trace: what its job carries, and the worker's side.

The central process sends each remote attempt the W3C ``traceparent`` of the attempt's span
(``trace_link``, called as ``dask_executor.py`` builds the ``RemoteJob``), never an exporter
header or a key. The worker (``remote_node.run_remote``) starts its own exporter from its own
``OTEL_*`` environment, or sends to the run's endpoint when that names none, hangs the node's
spans under the link, and flushes them before its result goes back (``worker_tracing``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from .. import tracing
from ..errors import UsageError
from .otel_export import TraceConfig, current, flush, start, trace_config

__all__ = ["TraceLink", "trace_link", "worker_tracing"]


@dataclass(frozen=True)
class TraceLink:
    """What a remote node needs to join the run's trace: plain data, no header, no secret."""

    traceparent: str
    content: bool
    protocol: str
    endpoint: str  # used when the worker's own environment names none


def _stderr_note(text: str) -> None:
    sys.stderr.write(f"anti-sprawl: note: {text}\n")


def trace_link() -> TraceLink | None:
    """What a remote node of the current attempt is sent to join its trace (None: off)."""
    config, parent = current(), tracing.traceparent()
    if config is None or parent is None:
        return None
    return TraceLink(parent, config.content, config.protocol, config.endpoint)


@contextlib.contextmanager
def worker_tracing(
    link: TraceLink | None, env: Mapping[str, str], redact: Callable[[str], str]
) -> Iterator[None]:
    """On a Dask worker: trace the block under the run's attempt span ``link`` names, with the
    worker's exporter environment (the run's endpoint when it names none); flush at the end."""
    if link is None:
        yield
        return
    mine = trace_config(True, env)
    own = bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    named = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    protocol = mine.protocol if named else link.protocol
    config = TraceConfig(True, False, link.content, protocol, mine.endpoint)
    try:
        started = start(config, redact, _stderr_note, endpoint=None if own else link.endpoint)
    except UsageError as exc:  # the worker's own protocol setting: never the node's failure
        _stderr_note(f"{exc}; this node is not traced")
        started = False
    if not started:
        yield
        return
    with tracing.joined(link.traceparent):
        try:
            yield
        finally:
            flush()
