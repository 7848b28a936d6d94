"""The call that ends a task, logged in the entry of its effect.

A `complete_task` or `fail_task` that ran has its effect in the settle: the `completed` or
`failed` entry, written in the same transaction as the call's record. So a settle that applies
writes the call's record inside that entry, as its `call` — the `tool_call` fields that say
anything (tool, args_digest, summary, checked_seq, checked_at, result_digest, limited_args and
ceilings when present; `allowed` and `ok` are true by being there) — and no `tool_call` beside
it: one log entry fewer a task, each ~160 k instructions of canonical JSON, hashing, the shape
check, chaining and the INSERT (docs/architecture.md, "Lifecycle calls log with their effect").

A call that cannot say everything this way keeps its own `tool_call`: one that failed, was
denied, approved by a person, written after its session was cut off (superseded, with no
ending entry), or anything else unusual. Logs written before this carry both entries and are
read as they are.

Readers that count or place calls (the verifier, the trace export) take every call through
`with_calls`, which gives the ending's call as a `tool_call` entry of the same seq, time, task
and agent, just before its ending: one reading for old logs and new ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from firm.events import EventKind

# Which tool's call each ending carries.
ENDING_TOOL = {EventKind.COMPLETED: "complete_task", EventKind.FAILED: "fail_task"}
# A call's fields an ending's `call` keeps; a call with any other (error, superseded,
# approval, started_seq, interrupted) keeps its own entry.
_KEPT = frozenset(
    {
        "tool",
        "args_digest",
        "summary",
        "checked_seq",
        "checked_at",
        "result_digest",
        "limited_args",
        "ceilings",
    }
)
_IMPLIED = ("allowed", "ok")

Pending = tuple[str, str | None, str | None, dict[str, Any]]


def fold(
    ending: EventKind, task_id: str, agent: str, events: Sequence[Pending]
) -> dict[str, Any] | None:
    """The record for the ending entry of the call that is the settle's last entry, or None:
    the call keeps its own entry. Only the last: the ending is written right after the settle's
    entries, so the log keeps the order the calls were made in (a call refused after the
    ending, logged after it, leaves the ending's call its own entry)."""
    if not events:
        return None
    kind, tid, who, data = events[-1]
    if (
        kind != EventKind.TOOL_CALL
        or tid != task_id
        or who != agent
        or data.get("tool") != ENDING_TOOL[ending]
        or data.get("allowed") is not True
        or data.get("ok") is not True
        or not _KEPT.issuperset(k for k in data if k not in _IMPLIED)
    ):
        return None
    return {k: v for k, v in data.items() if k not in _IMPLIED}


def call_of(kind: str, data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The `tool_call` data an ending entry carries, as its own entry would have held it;
    None for any other entry, or an ending without one (an old log's, or a session that
    ended without the call)."""
    if data is None or kind not in ENDING_TOOL:
        return None
    call = data.get("call")
    if not isinstance(call, dict):
        return None
    return {**call, "allowed": True, "ok": True}


class _Entry(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def data(self) -> Any: ...


E = TypeVar("E", bound=_Entry)


def as_call(e: E) -> E | None:
    """The call an ending entry carries, as a `tool_call` entry of the ending's seq, time, task
    and agent (a copy: the entry is not changed); None for any other entry."""
    call = call_of(e.kind, e.data)
    if call is None:
        return None
    return dataclasses.replace(e, kind=EventKind.TOOL_CALL, data=call)  # type: ignore[type-var]


def with_calls(entries: Iterable[E]) -> Iterator[E]:
    """Every entry, and before each ending that carries its call, that call (`as_call`)."""
    for e in entries:
        call = as_call(e)
        if call is not None:
            yield call
        yield e
