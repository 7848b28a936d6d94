"""Spans of this process's events, exported through the OpenTelemetry SDK.

Span ids come from firm (see spans.py), so the spans are built as the SDK's ReadableSpan and
handed to a batch processor directly: the SDK's tracer would pick ids of its own.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import queue
import threading
from collections import OrderedDict
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as SpanEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from firm.telemetry.spans import SpanBuilder, SpanRecord, TaskInfo

log = logging.getLogger(__name__)

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_TASK_CACHE = 10_000


def _version() -> str:
    try:
        return importlib.metadata.version("firm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


_SCOPE = InstrumentationScope("firm", _version())


def capture_content_requested() -> bool:
    """Prompts and completions go into spans only when asked (the GenAI conventions' opt-in)."""
    value = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.strip().lower() in ("1", "true", "yes")


def exporter_from_env() -> SpanExporter:
    choice = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")[0].strip().lower()
    if choice == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if choice != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER={choice!r}: firm exports otlp or console")
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter()  # type: ignore[no-any-return]
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


class Tracing:
    """Follows the events this process commits and exports their spans."""

    def __init__(self, store: Any, exporter: SpanExporter, capture_content: bool = False):
        self._store = store
        self._resource = Resource.create({"service.name": "firm"})
        self._processor = BatchSpanProcessor(exporter)
        self._tasks: OrderedDict[str, TaskInfo] = OrderedDict()
        self._builder = SpanBuilder(self._task_info, capture_content)
        self._queue: queue.SimpleQueue[list[Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="firm-tracing", daemon=True)
        self._thread.start()
        # Events are queued as they commit; spans are built on this object's thread, so a
        # commit never waits on a store read or an exporter.
        self._unsubscribe = store.subscribe(self._queue.put)
        self._closed = False

    @classmethod
    def from_env(cls, store: Any) -> Tracing | None:
        try:
            exporter = exporter_from_env()
        except (ValueError, ImportError) as exc:
            log.warning("tracing is off: %s", exc)
            return None
        return cls(store, exporter, capture_content_requested())

    def close(self) -> None:
        """Stop following, export what is built, and flush the exporter."""
        if self._closed:
            return
        self._closed = True
        self._unsubscribe()
        self._queue.put(None)
        self._thread.join(10)
        self._processor.shutdown()

    # --- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            events = self._queue.get()
            if events is None:
                return
            try:
                for record in self._builder.feed(events):
                    self._processor.on_end(self._readable(record))
            except Exception:  # tracing must never take the engine down
                log.exception("could not make spans of %d events", len(events))

    def _task_info(self, task_id: str) -> TaskInfo:
        info = self._tasks.get(task_id)
        if info is not None:
            self._tasks.move_to_end(task_id)
            return info
        try:
            t = self._store.get_task(task_id)
        except Exception as exc:
            raise LookupError(task_id) from exc
        info = TaskInfo(t.root_id, t.parent_id, t.assignee, t.title, t.created_at, t.description)
        self._tasks[task_id] = info
        if len(self._tasks) > _TASK_CACHE:
            self._tasks.popitem(last=False)
        return info

    def _readable(self, r: SpanRecord) -> ReadableSpan:
        ctx = SpanContext(r.trace_id, r.span_id, is_remote=False, trace_flags=_SAMPLED)
        parent = (
            SpanContext(r.trace_id, r.parent_id, is_remote=True, trace_flags=_SAMPLED)
            if r.parent_id
            else None
        )
        status = Status(StatusCode.ERROR, r.error) if r.error else Status(StatusCode.UNSET)
        kind = SpanKind.CLIENT if r.name.startswith("chat ") else SpanKind.INTERNAL
        return ReadableSpan(
            name=r.name,
            context=ctx,
            parent=parent,
            resource=self._resource,
            attributes=r.attributes,
            events=[SpanEvent(n, attrs, _ns(t)) for n, t, attrs in r.events],
            kind=kind,
            status=status,
            start_time=_ns(r.start),
            end_time=_ns(max(r.end, r.start)),
            instrumentation_scope=_SCOPE,
        )


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
