"""A real OTLP/HTTP trace receiver on loopback: what a collector does with the bytes firm sends,
minus the forwarding. Spans are decoded with OpenTelemetry's own protobuf definitions."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    start: int
    end: int
    attributes: dict[str, Any]
    status_code: int
    status_message: str
    events: list[str]


@dataclass
class Collected:
    spans: list[Span] = field(default_factory=list)
    requests: int = 0
    lock: threading.Condition = field(default_factory=threading.Condition)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


class OtlpReceiver:
    def __init__(self) -> None:
        collected = self.collected = Collected()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                spans = [
                    Span(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_id=s.parent_span_id.hex(),
                        start=s.start_time_unix_nano,
                        end=s.end_time_unix_nano,
                        attributes={a.key: _value(a.value) for a in s.attributes},
                        status_code=s.status.code,
                        status_message=s.status.message,
                        events=[e.name for e in s.events],
                    )
                    for rs in request.resource_spans
                    for ss in rs.scope_spans
                    for s in ss.spans
                ]
                with collected.lock:
                    collected.spans.extend(spans)
                    collected.requests += 1
                    collected.lock.notify_all()
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def env(self) -> dict[str, str]:
        """Variables that point firm's OTLP exporter here, exporting promptly."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}

    def spans(self) -> list[Span]:
        with self.collected.lock:
            return list(self.collected.spans)

    def wait_for(self, predicate: Any, timeout: float = 20) -> list[Span]:
        with self.collected.lock:
            self.collected.lock.wait_for(lambda: predicate(self.collected.spans), timeout)
            return list(self.collected.spans)
