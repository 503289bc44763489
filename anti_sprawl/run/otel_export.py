"""Where a run's spans go: the OpenTelemetry SDK and its OTLP exporter, set up from the standard
environment, or a clear word why not.

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) is set or the
command got ``--otel``; ``OTEL_SDK_DISABLED=true`` turns it off. The SDK reads the rest of the
standard environment itself (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_EXPORTER_OTLP_HEADERS``, ``..._TIMEOUT``, ``OTEL_BSP_*``); the protocol is
``http/protobuf`` (the extra ships it), ``grpc`` when its exporter is installed. The spans
themselves are made in ``tracing.py``; this module only installs a tracer there
(``otel_remote.py`` carries it to Dask nodes).

A receiver that is down never slows or breaks a run: spans leave in a background batch
(``BatchSpanProcessor``), an export that fails is one note on stderr (never the exporter's
headers, which may hold a token), and ``shutdown`` waits at most ``SHUTDOWN_SECONDS``: for the
last spans to leave, then, when the receiver still holds them, it tells the exporter to stop
(its retries end) and joins the export thread in the time left, so no thread of this run
lives on to export (or print a note) under whatever the process does next. The
opentelemetry packages are imported only here and only when tracing is on, so a run without
it never loads them (the CLI's start-up stays as fast).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

from .. import tracing
from ..errors import UsageError

__all__ = [
    "INSTALL_HINT",
    "SHUTDOWN_SECONDS",
    "STOP_SECONDS",
    "TraceConfig",
    "checked",
    "current",
    "flush",
    "shutdown",
    "start",
    "trace_config",
    "traced_agent",
]

INSTALL_HINT = "--otel needs OpenTelemetry: pip install 'anti-sprawl[otel]'"
SHUTDOWN_SECONDS = 5.0  # the most a run waits for its last spans to leave
STOP_SECONDS = 1.0  # of that, what is kept for the export thread to end once told to stop
DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class TraceConfig:
    """Whether and how this command traces, resolved once from its flag and environment."""

    enabled: bool
    by_flag: bool  # --otel: a missing extra is a usage error, not a note
    content: bool  # prompts, replies and tool input/output on spans (redacted)
    protocol: str  # OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL; http/protobuf by default
    endpoint: str  # where the spans go, without any user:password@ part


def trace_config(flag: bool, env: Mapping[str, str]) -> TraceConfig:
    """The tracing of one command from ``--otel`` and the environment (the CLI passes it)."""
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or ""
    if not endpoint and env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        endpoint = env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
    disabled = env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE
    content = env.get("ANTI_SPRAWL_OTEL_CONTENT", "").strip().lower() in _TRUE or (
        env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower() in _TRUE
    )
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    return TraceConfig(
        enabled=(flag or bool(endpoint)) and not disabled,
        by_flag=flag,
        content=content,
        protocol=protocol,
        endpoint=_without_userinfo(endpoint or DEFAULT_ENDPOINT),
    )


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


@dataclass
class _Session:
    provider: Any  # the SDK's TracerProvider
    exporter: _QuietExporter
    config: TraceConfig
    processor: Any  # the SDK's BatchSpanProcessor: its thread calls the exporter


_session: _Session | None = None
_lock = threading.Lock()


def start(
    config: TraceConfig,
    redact: Callable[[str], str],
    note: Callable[[str], None],
    endpoint: str | None = None,
) -> bool:
    """Install a tracer when ``config`` says so; True when spans will be exported.

    Without the extra: ``UsageError`` (exit 2) for ``--otel``, else one ``note`` and no
    tracing. ``endpoint`` overrides the environment's (a Dask worker told the run's)."""
    global _session
    if not config.enabled:
        return False
    with _lock:
        if _session is not None:
            return True
        try:
            exporter = _exporter(config.protocol, endpoint)
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            why = _missing(config, exc)
            if config.by_flag:
                raise UsageError(why) from None
            note(f"{why}; the run goes on without traces")
            return False
        resource = Resource.create()
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "anti-sprawl"}))
        quiet = _QuietExporter(exporter, note)
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        processor = BatchSpanProcessor(cast(Any, quiet))  # an exporter by shape
        provider.add_span_processor(processor)
        _silence_sdk_logs()
        tracing.install(provider.get_tracer("anti_sprawl"), content=config.content, redact=redact)
        _session = _Session(provider, quiet, config, processor)
        return True


def checked(config: TraceConfig, note: Callable[[str], None]) -> TraceConfig:
    """``config`` once its packages are known to import (before a run starts anything):
    without them, ``UsageError`` for ``--otel``, else one ``note`` and tracing off."""
    if not config.enabled:
        return config
    try:
        _exporter_class(config.protocol)
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        why = _missing(config, exc)
        if config.by_flag:
            raise UsageError(why) from None
        note(f"{why}; the run goes on without traces")
        return dataclasses.replace(config, enabled=False)
    return config


def _missing(config: TraceConfig, exc: ImportError) -> str:
    if config.protocol == "grpc":
        return (
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter: pip install "
            "opentelemetry-exporter-otlp-proto-grpc (or use http/protobuf)"
        )
    hint = INSTALL_HINT if config.by_flag else INSTALL_HINT.replace("--otel", "tracing")
    return f"{hint} ({exc.name or 'opentelemetry'} is missing)"


def _exporter(protocol: str, endpoint: str | None) -> Any:
    """The OTLP span exporter for ``protocol``; it reads the rest of its environment itself."""
    return _exporter_class(protocol)(endpoint=endpoint)


def _exporter_class(protocol: str) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter
    if protocol not in ("http/protobuf", "http"):
        raise UsageError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported: use http/protobuf "
            "(or grpc with opentelemetry-exporter-otlp-proto-grpc installed)"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter


def _silence_sdk_logs() -> None:
    """The exporter's own log lines would repeat per batch: our one note says it instead."""
    for name in ("opentelemetry.exporter", "opentelemetry.sdk"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


class _QuietExporter:
    """The real exporter, whose failures (a receiver down, a refused batch) become one note;
    once ``stop``ped, it drops what is left instead of waiting on a receiver."""

    def __init__(self, inner: Any, note: Callable[[str], None]):
        self.inner = inner
        self.note = note
        self.failed = False
        self.stopped = False
        self._closed = threading.Lock()  # held once the inner exporter was shut down

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        if self.stopped:
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # an exporter must not raise into the SDK's thread
            self._failed(type(exc).__name__)
            return SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self._failed("the receiver did not accept them")
        return result

    def _failed(self, why: str) -> None:
        if not self.failed:
            self.failed = True
            self.note(f"traces could not be exported ({why}); the run is not affected")

    def stop(self) -> None:
        """Drop what is left: the inner exporter's shutdown ends its retry wait, and a
        request in flight ends at its own timeout (``OTEL_EXPORTER_OTLP_TIMEOUT``)."""
        self.stopped = True
        self.shutdown()

    def shutdown(self) -> None:
        if self._closed.acquire(blocking=False):  # the SDK calls it too, after ``stop``
            with contextlib.suppress(Exception):
                self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def shutdown(timeout: float = SHUTDOWN_SECONDS) -> None:
    """Send what is left and stop, waiting at most ``timeout`` seconds: until ``STOP_SECONDS``
    (or a fifth of ``timeout``) before the end for the spans to leave, then the exporter is
    stopped and its thread joined in the time left. A thread still blocked in a request after
    that is given up on (it ends at the exporter's own timeout)."""
    global _session
    with _lock:
        session, _session = _session, None
    tracing.uninstall()
    if session is None:
        return
    deadline = time.monotonic() + timeout
    grace = min(STOP_SECONDS, timeout / 5)
    closing = threading.Thread(target=_quietly, args=(session.provider.shutdown,), daemon=True)
    closing.start()
    closing.join(max(0.0, deadline - grace - time.monotonic()))
    if closing.is_alive():  # the receiver holds the last spans: stop waiting for it
        session.exporter.stop()
    for thread in (_export_thread(session.processor), closing):
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))


def _export_thread(processor: Any) -> threading.Thread | None:
    """The thread the BatchSpanProcessor exports from (an SDK attribute; None if it moved)."""
    thread = getattr(getattr(processor, "_batch_processor", None), "_worker_thread", None)
    return thread if isinstance(thread, threading.Thread) else None


def current() -> TraceConfig | None:
    """The tracing this process exports with (None: off)."""
    session = _session
    return session.config if session is not None else None


def flush(timeout: float = SHUTDOWN_SECONDS) -> None:
    """Send the spans ended so far (a Dask node's, before its result goes back)."""
    session = _session
    if session is not None:
        _quietly(session.provider.force_flush, int(timeout * 1000))


def _quietly(fn: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(Exception):
        fn(*args)


@contextlib.contextmanager
def traced_agent(
    config: TraceConfig,
    redact: Callable[[str], str],
    note: Callable[[str], None],
    name: str,
) -> Iterator[None]:
    """A command that is one agent (``plan``): its model and tool calls under
    ``invoke_agent <name>``, exported before the command ends."""
    started = start(config, redact, note)
    try:
        with tracing.agent(name, {}):
            yield
    finally:
        if started:
            shutdown()
