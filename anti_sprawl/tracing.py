"""OpenTelemetry spans of a run in the GenAI semantic conventions, or nothing at all.

Why here, at the bottom of the package: the hooks are called from the layers that see each
event first (``run/runner.py`` the run, ``run/node.py`` each node attempt, ``agent/loop.py`` each
model call and tool call), so the module they call must sit below all of them and import none
of them. It holds no SDK either: ``run/otel_export.py`` builds the exporter and ``install``s a
tracer here; until then every hook is a no-op that imports nothing, so a run without tracing
never loads ``opentelemetry`` (the optional extra ``anti-sprawl[otel]``).

The span tree (https://opentelemetry.io/docs/specs/semconv/gen-ai/):

    invoke_workflow <plan_id>      one per execute/resume
      invoke_agent <task_id>       one per node attempt
        chat <model>               one per model call (tokens as the budget charged them)
        execute_tool <tool>        one per tool call

Nodes run in the scheduler's threads, which start with an empty context: an attempt's span
takes the run's span as its parent (``_State.run``), and a Dask node takes the W3C
``traceparent`` its job carries (``joined``). What a model or a file said (prompts, replies,
tool arguments and results) is recorded only when ``content`` is on, and then through the
redactor (``redact.py``); attribute values are never secrets by construction (ids, counts,
paths, names).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Attributes",
    "SpanHandle",
    "active",
    "agent",
    "annotate_call",
    "chat_answered",
    "chat_failed",
    "chat_started",
    "install",
    "joined",
    "manifest_attributes",
    "tool",
    "traceparent",
    "uninstall",
    "workflow",
]

AttrValue = str | bool | int | float | Sequence[str] | Sequence[int]
Attributes = Mapping[str, AttrValue | None]


@dataclass
class _State:
    tracer: Any  # an opentelemetry.trace.Tracer
    content: bool  # record prompts, replies and tool input/output (redacted)
    redact: Callable[[str], str]
    run: Any = None  # the invoke_workflow span's context: the parent of node threads' spans


_state: _State | None = None
_calls = threading.local()  # the model call in flight on this thread (``chat_started``)


def install(tracer: Any, *, content: bool, redact: Callable[[str], str]) -> None:
    """Turn the hooks on with ``tracer`` (run/otel_export.py builds it)."""
    global _state
    _state = _State(tracer, content, redact)


def uninstall() -> None:
    """Turn the hooks back into no-ops (after the exporter was shut down)."""
    global _state
    _state = None


def active() -> bool:
    return _state is not None


class SpanHandle:
    """One span, or nothing when tracing is off; ``set`` skips None values."""

    def __init__(self, span: Any = None):
        self.span = span

    def set(self, attributes: Attributes) -> None:
        if self.span is None:
            return
        for key, value in attributes.items():
            if value is not None:
                self.span.set_attribute(key, value if isinstance(value, str) else _plain(value))
        if isinstance(attributes.get("error.type"), str):
            self.fail(str(attributes["error.type"]))

    def fail(self, kind: str, message: str = "") -> None:
        """Mark the span failed: ``error.type`` and an error status (never a traceback)."""
        if self.span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attribute("error.type", kind)
        self.span.set_status(Status(StatusCode.ERROR, message[:200]))

    def content(self, key: str, value: Any) -> None:
        """A prompt, reply or tool text: only when content capture is on, redacted."""
        if self.span is None or _state is None or not _state.content:
            return
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        self.span.set_attribute(key, _state.redact(text))

    def result(self, text: str, is_error: bool) -> None:
        """A tool call's result (content capture only) and whether it failed."""
        self.content("gen_ai.tool.call.result", text)
        if is_error:
            self.fail("tool_error")


def _plain(value: Any) -> Any:
    if isinstance(value, bool | int | float):
        return value
    return [v for v in value]


@contextlib.contextmanager
def _span(name: str, attributes: Attributes, kind: str = "INTERNAL") -> Iterator[SpanHandle]:
    """A span current on this thread for the block; a node thread's parent is the run."""
    if _state is None:
        yield SpanHandle()
        return
    from opentelemetry import trace

    parent = None
    if not trace.get_current_span().get_span_context().is_valid:
        parent = _state.run
    with _state.tracer.start_as_current_span(
        name,
        context=parent,
        kind=getattr(trace.SpanKind, kind),
        record_exception=False,  # a traceback may quote a secret or a file
        set_status_on_exception=False,
    ) as span:
        handle = SpanHandle(span)
        handle.set(attributes)
        try:
            yield handle
        except BaseException as exc:
            handle.fail(type(exc).__name__)
            raise


@contextlib.contextmanager
def workflow(plan_id: str, attributes: Attributes) -> Iterator[SpanHandle]:
    """``invoke_workflow <plan_id>``: the run; node threads' spans hang under it."""
    attrs = {"gen_ai.operation.name": "invoke_workflow", **attributes}
    with _span(f"invoke_workflow {plan_id}", attrs) as handle:
        if _state is None:
            yield handle
            return
        from opentelemetry import trace

        outer, _state.run = _state.run, trace.set_span_in_context(handle.span)
        try:
            yield handle
        finally:
            if _state is not None:
                _state.run = outer


def agent(task_id: str, attributes: Attributes) -> contextlib.AbstractContextManager[SpanHandle]:
    """``invoke_agent <task_id>``: one attempt of one node."""
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": task_id,
        "anti_sprawl.node.id": task_id,
        **attributes,
    }
    return _span(f"invoke_agent {task_id}", attrs)


def tool(name: str, call_id: str, arguments: Any) -> contextlib.AbstractContextManager[SpanHandle]:
    """``execute_tool <tool>``: one tool call of the agent (its arguments: content only)."""
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    span = _span(f"execute_tool {name}", attrs)
    return _with_arguments(span, arguments)


@contextlib.contextmanager
def _with_arguments(
    span: contextlib.AbstractContextManager[SpanHandle], arguments: Any
) -> Iterator[SpanHandle]:
    with span as handle:
        handle.content("gen_ai.tool.call.arguments", arguments)
        yield handle


def chat_started(provider: str, model: str, request: Any) -> None:
    """A model call starts on this thread: ``chat <model>`` until answered or failed."""
    _calls.span = None
    if _state is None:
        return
    from opentelemetry import trace

    parent = None if trace.get_current_span().get_span_context().is_valid else _state.run
    span = _state.tracer.start_span(f"chat {model}", context=parent, kind=trace.SpanKind.CLIENT)
    handle = SpanHandle(span)
    handle.set(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": getattr(request, "max_output_tokens", None),
            "anti_sprawl.call.id": getattr(request, "call_id", None),
        }
    )
    if _state.content:
        handle.content("gen_ai.system_instructions", [b.text for b in request.system])
        handle.content(
            "gen_ai.input.messages", [m.model_dump(mode="json") for m in request.messages]
        )
    _calls.span = handle


def annotate_call(attributes: Attributes) -> None:
    """Add to the model call in flight on this thread (its manifest: run/node_work.py)."""
    handle: SpanHandle | None = getattr(_calls, "span", None)
    if handle is not None:
        handle.set(attributes)


def chat_answered(response: Any, usage: Any) -> None:
    """End the call in flight with ``usage``, the tokens the budget charged (the journal's)."""
    handle: SpanHandle | None = getattr(_calls, "span", None)
    if handle is None:
        return
    _calls.span = None
    handle.set(
        {
            "gen_ai.response.model": response.model,
            "gen_ai.response.id": response.raw_id,
            "gen_ai.response.finish_reasons": [response.stop_reason],
            # input_tokens counts cached tokens too (providers/base.py, Usage)
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
            "anti_sprawl.usage.estimated": usage.estimated,
        }
    )
    if _state is not None and _state.content:
        calls = [c.model_dump(mode="json") for c in response.tool_calls]
        handle.content("gen_ai.output.messages", {"text": response.text, "tool_calls": calls})
    handle.span.end()


def chat_failed(error: BaseException) -> None:
    """End the call in flight as failed: ``error.type`` is the error's class."""
    handle: SpanHandle | None = getattr(_calls, "span", None)
    if handle is None:
        return
    _calls.span = None
    # A server's error text may quote the request: content, so only when that is on.
    said = _state.redact(str(error)) if _state is not None and _state.content else ""
    handle.fail(type(error).__name__, said)
    handle.span.end()


def manifest_attributes(path: Path, root: Path) -> Attributes:
    """A model call's manifest: where it is in the run's directory, and its bytes' sha256."""
    if _state is None:
        return {}
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        digest = None
    name = (
        path.relative_to(root.parent).as_posix() if path.is_relative_to(root.parent) else path.name
    )
    return {"anti_sprawl.manifest.path": name, "anti_sprawl.manifest.sha256": digest}


def traceparent() -> str | None:
    """The W3C ``traceparent`` of this thread's current span (None when off or outside one)."""
    if _state is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


@contextlib.contextmanager
def joined(parent: str | None) -> Iterator[None]:
    """Spans of the block hang under the remote span ``parent`` names (a Dask node)."""
    if _state is None or not parent:
        yield
        return
    from opentelemetry import context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    token = context.attach(TraceContextTextMapPropagator().extract({"traceparent": parent}))
    try:
        yield
    finally:
        context.detach(token)
