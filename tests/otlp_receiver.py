"""An OTLP/HTTP trace receiver on 127.0.0.1 for the tracing tests: it accepts ``POST /v1/traces``,
keeps every request's raw bytes and headers, and decodes the protobuf with opentelemetry-proto's
``ExportTraceServiceRequest`` (what a collector would see)."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Span:
    """One received span, its attributes decoded to Python values."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    status: int
    attributes: dict[str, Any]
    resource: dict[str, Any]


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@dataclass
class OTLPReceiver:
    """``with OTLPReceiver() as r:`` ... ``r.endpoint``, ``r.spans()``, ``r.raw``."""

    raw: list[bytes] = field(default_factory=list)  # each request body, decompressed
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver._lock:
                    receiver.raw.append(body)
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                    receiver.paths.append(self.path)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                return

        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> OTLPReceiver:
        self.thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[Span]:
        out = []
        with self._lock:
            bodies = list(self.raw)
        for body in bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for rs in request.resource_spans:
                resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append(
                            Span(
                                name=s.name,
                                trace_id=s.trace_id.hex(),
                                span_id=s.span_id.hex(),
                                parent_id=s.parent_span_id.hex(),
                                kind=s.kind,
                                status=s.status.code,
                                attributes={a.key: _value(a.value) for a in s.attributes},
                                resource=resource,
                            )
                        )
        return out

    def as_json(self) -> list[dict[str, Any]]:
        return [MessageToDict(ExportTraceServiceRequest.FromString(b)) for b in self.raw]
