"""Spans from the event log: pure data, no OpenTelemetry import.

The log already says when every session started and ended, every model call (with its
duration and tokens), every tool call (checked at, logged after) and every delegation. A
process turns the events it commits into spans; their ids are derived from task ids and
sequence numbers, so a goal is one trace across processes, workers and restarts with nothing
stored for it: a subtask's sessions sit under the delegation that created the subtask, and
that delegation under the session that made it.

Span names and attributes follow OpenTelemetry's GenAI semantic conventions
(`invoke_agent AGENT`, `chat MODEL`, `execute_tool TOOL`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from firm.endcall import as_call
from firm.endings import ends_many
from firm.events import EventKind

SESSION_ENDS = {
    EventKind.COMPLETED,
    EventKind.FAILED,
    EventKind.WAITING,
    EventKind.CANCELLED,
    EventKind.REQUEUED,
}
CONTENT_LIMIT = 4000


def trace_id(root_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"firm-trace:{root_id}".encode()).digest()[:16], "big")


def span_id(*key: object) -> int:
    raw = hashlib.sha256(("firm-span:" + "\x1f".join(map(str, key))).encode()).digest()
    return int.from_bytes(raw[:8], "big") or 1


def goal_span_id(root_id: str) -> int:
    return span_id(root_id, "goal")


def delegation_span_id(task_id: str) -> int:
    """The span of the delegation that created a task; its sessions are its children."""
    return span_id(task_id, "delegation")


@dataclass
class SpanRecord:
    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start: float  # seconds since the epoch
    end: float
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    events: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)


@dataclass
class _Open:
    span: SpanRecord
    task_id: str


@dataclass
class TaskInfo:
    """What spans need to know of a task that events do not carry."""

    root_id: str
    parent_id: str | None
    assignee: str
    title: str
    created_at: float
    description: str = ""


class SpanBuilder:
    """Turns one process's committed events into finished spans.

    `task_info(task_id)` reads a task (its root, parent, created time) when an event needs
    it; the builder remembers the sessions this process has open.
    """

    def __init__(self, task_info: Any, capture_content: bool = False):
        self._info = task_info
        self._capture = capture_content
        self._sessions: dict[str, _Open] = {}

    def feed(self, events: list[Any]) -> list[SpanRecord]:
        done: list[SpanRecord] = []
        for e in events:
            if e.task_id is None:
                continue
            try:
                done.extend(self._one(e))
            except LookupError:
                continue  # a task this store no longer has: nothing to attach a span to
        return done

    def _one(self, e: Any) -> list[SpanRecord]:
        kind, data = e.kind, e.data or {}
        if ends_many(kind, data):
            return self._subtree_cancelled(e)
        if kind == EventKind.STARTED:
            return self._start_session(e)
        session = self._sessions.get(e.task_id)
        out: list[SpanRecord] = []
        if kind == EventKind.DELEGATED:
            out.extend(self._delegated(e))
            call = as_call(e)  # the delegate_task call, logged in its subtask's entry
            delegator = self._sessions.get(call.task_id) if call is not None else None
            if call is not None and delegator is not None:
                out.append(self._tool_call(call, delegator.span))
        elif kind == EventKind.MODEL_CALL and session is not None:
            out.append(self._model_call(e, session.span))
        elif (
            kind in (EventKind.TOOL_CALL, EventKind.TOOL_DENIED, EventKind.TOOL_ERROR)
            and session is not None
        ):
            out.append(self._tool_call(e, session.span))
        elif kind in (EventKind.COMPLETED, EventKind.FAILED) and session is not None:
            call = as_call(e)  # complete_task or fail_task, logged in its ending's entry
            if call is not None:
                out.append(self._tool_call(call, session.span))
        elif kind == EventKind.THOUGHT and session is not None and self._capture:
            text = str(data.get("text", ""))[:CONTENT_LIMIT]
            session.span.events.append(("gen_ai.assistant.message", e.ts, {"content": text}))
        if kind in SESSION_ENDS or (kind == EventKind.WOKEN and data.get("immediately")):
            out.extend(self._end_session(e))
        if kind in (EventKind.COMPLETED, EventKind.FAILED, EventKind.CANCELLED):
            info = self._info(e.task_id)
            if info.parent_id is None:
                out.append(self._goal(e, info))
        return out

    # --- sessions -------------------------------------------------------------------------

    def _start_session(self, e: Any) -> list[SpanRecord]:
        info = self._info(e.task_id)
        parent = (
            goal_span_id(info.root_id) if info.parent_id is None else delegation_span_id(e.task_id)
        )
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": info.assignee,
            "gen_ai.agent.name": info.assignee,
            "firm.task.id": e.task_id,
            "firm.task.title": info.title,
            "firm.root.id": info.root_id,
            "firm.session.attempt": (e.data or {}).get("attempt", 0),
            "firm.session.turn": (e.data or {}).get("turn", 0),
            "firm.worker": (e.data or {}).get("worker", ""),
            "firm.seq.start": e.seq,
        }
        if self._capture and info.description:
            attrs["gen_ai.input.messages"] = info.description[:CONTENT_LIMIT]
        span = SpanRecord(
            name=f"invoke_agent {info.assignee}",
            trace_id=trace_id(info.root_id),
            span_id=span_id(e.task_id, "session", e.seq),
            parent_id=parent,
            start=e.ts,
            end=e.ts,
            attributes=attrs,
        )
        self._sessions[e.task_id] = _Open(span, e.task_id)
        return []

    def _subtree_cancelled(self, e: Any) -> list[SpanRecord]:
        """A subtree's cancel (one entry on its top, firm/endings.py) ends every session of
        this process under that top, as per-task entries did."""
        out: list[SpanRecord] = []
        for task_id in [t for t in self._sessions if self._under(t, e.task_id)]:
            out.extend(self._end_session(e, task_id))
        info = self._info(e.task_id)
        if info.parent_id is None:
            out.append(self._goal(e, info))
        return out

    def _under(self, task_id: str, top: str) -> bool:
        seen: set[str] = set()
        cur: str | None = task_id
        while cur is not None and cur not in seen:
            if cur == top:
                return True
            seen.add(cur)
            try:
                cur = self._info(cur).parent_id
            except LookupError:
                return False
        return False

    def _end_session(self, e: Any, task_id: str | None = None) -> list[SpanRecord]:
        opened = self._sessions.pop(task_id or e.task_id, None)
        if opened is None:
            return []
        span = opened.span
        span.end = e.ts
        span.attributes["firm.outcome"] = e.kind
        span.attributes["firm.seq.end"] = e.seq
        if e.kind == EventKind.FAILED:
            span.error = str((e.data or {}).get("error", "failed"))[:500]
        return [span]

    # --- what happens in a session ----------------------------------------------------------

    def _model_call(self, e: Any, session: SpanRecord) -> SpanRecord:
        d = e.data or {}
        model = str(d.get("model") or "model")
        seconds = float(d.get("seconds") or 0.0)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": int(d.get("prompt_tokens") or 0),
            "gen_ai.usage.output_tokens": int(d.get("completion_tokens") or 0),
            "firm.task.id": e.task_id,
            "firm.seq": e.seq,
        }
        if d.get("finish_reason"):
            attrs["gen_ai.response.finish_reasons"] = [str(d["finish_reason"])]
        if d.get("cached_tokens"):
            attrs["gen_ai.usage.cache_read.input_tokens"] = int(d["cached_tokens"])
        return SpanRecord(
            name=f"chat {model}",
            trace_id=session.trace_id,
            span_id=span_id(e.task_id, "event", e.seq),
            parent_id=session.span_id,
            start=e.ts - max(seconds, 0.0),
            end=e.ts,
            attributes=attrs,
        )

    def _tool_call(self, e: Any, session: SpanRecord) -> SpanRecord:
        d = e.data or {}
        tool = str(d.get("tool") or "tool")
        verdict = "denied" if e.kind == EventKind.TOOL_DENIED else "allowed"
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "firm.authority.verdict": verdict,
            "firm.task.id": e.task_id,
            "firm.seq": e.seq,
        }
        error = None
        if e.kind == EventKind.TOOL_DENIED:
            reason = str(d.get("reason") or d.get("code") or "denied")
            attrs["firm.authority.reason"] = reason[:500]
            error = f"denied: {reason}"[:500]
        elif e.kind == EventKind.TOOL_ERROR or d.get("ok") is False:
            error = str(d.get("error") or "the tool failed")[:500]
        checked = d.get("checked_at")
        start = float(checked) if isinstance(checked, int | float) and checked <= e.ts else e.ts
        return SpanRecord(
            name=f"execute_tool {tool}",
            trace_id=session.trace_id,
            span_id=span_id(e.task_id, "event", e.seq),
            parent_id=session.span_id,
            start=start,
            end=e.ts,
            attributes=attrs,
            error=error,
        )

    def _delegated(self, e: Any) -> list[SpanRecord]:
        info = self._info(e.task_id)
        if info.parent_id is None:
            return []
        parent = self._sessions.get(info.parent_id)
        if parent is None:
            return []  # created outside a session of this process (a team's coordinator)
        return [
            SpanRecord(
                name=f"delegate {info.assignee}",
                trace_id=parent.span.trace_id,
                span_id=delegation_span_id(e.task_id),
                parent_id=parent.span.span_id,
                start=e.ts,
                end=e.ts,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "delegate_task",
                    "firm.task.id": e.task_id,
                    "firm.task.parent_id": info.parent_id,
                    "firm.delegate.assignee": info.assignee,
                    "firm.task.title": info.title,
                    "firm.seq": e.seq,
                },
            )
        ]

    def _goal(self, e: Any, info: TaskInfo) -> SpanRecord:
        return SpanRecord(
            name=f"goal {info.title}"[:200],
            trace_id=trace_id(info.root_id),
            span_id=goal_span_id(info.root_id),
            parent_id=None,
            start=info.created_at,
            end=e.ts,
            attributes={
                "firm.task.id": info.root_id,
                "firm.root.id": info.root_id,
                "gen_ai.agent.name": info.assignee,
                "firm.outcome": e.kind,
                "firm.seq.end": e.seq,
            },
            error=str((e.data or {}).get("error"))[:500] if e.kind == EventKind.FAILED else None,
        )
