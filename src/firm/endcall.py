"""A lifecycle call logged in the entry of its effect.

`complete_task` and `fail_task` have their effect in the settle — the `completed` or `failed`
entry, written in the same transaction as the call's record — and a `delegate_task` whose
reply's delegations are written together has its record written right after its subtask's
`delegated` entry, in the same transaction. Each pair said one thing twice. So the call's
record goes inside the entry of its effect, as its `call` — the `tool_call` fields that say
anything (tool, args_digest, summary, checked_seq, checked_at, result_digest, limited_args and
ceilings when present; `allowed` and `ok` are true by being there) — and no `tool_call` beside
it: an entry fewer, each ~45 k instructions of hashing, chaining and storing
(docs/architecture.md, "Lifecycle calls log with their effect").

Only when the two would have been neighbours in the log: the ending's call must be the settle's
last entry, so nothing was logged between it and the ending; the delegation's call must come
right after its subtask's `delegated` entry. So the log keeps the order the calls were made in.
A call that cannot say everything this way keeps its own `tool_call`: one that failed, was
denied, approved by a person, written after its session was cut off (superseded), or anything
else unusual. Logs written before this carry both entries and are read as they are.

Readers that count or place calls (the verifier, the trace export) take every call through
`with_calls`, which gives the carried call as a `tool_call` entry of the carrier's seq and
time, the calling task and agent, where its own entry would have been: just before an ending,
just after a delegation. One reading for old logs and new ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from firm.events import EventKind

DELEGATE_TOOL = "delegate_task"
# Which tool's call each carrier holds.
CARRIED_TOOL = {
    EventKind.COMPLETED: "complete_task",
    EventKind.FAILED: "fail_task",
    EventKind.DELEGATED: DELEGATE_TOOL,
}
# A call's fields a carried `call` keeps; a call with any other (error, superseded,
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


class SubtaskCall(tuple[str, str | None, str | None, dict[str, Any]]):
    """A delegate_task call's pending entry that names the subtask its body delegated: the
    write that carries it may log it in that subtask's `delegated` (`fold_delegation`)."""

    subtask: str

    def __new__(cls, entry: Pending, subtask: str) -> SubtaskCall:
        made = super().__new__(cls, entry)
        made.subtask = subtask
        return made


def _carried(tool: str, task_id: str | None, agent: str | None, entry: Pending) -> dict | None:
    """The entry's data as a carried `call`, if it is that tool's plain allowed call."""
    kind, tid, who, data = entry
    if (
        kind != EventKind.TOOL_CALL
        or tid != task_id
        or who != agent
        or data.get("tool") != tool
        or data.get("allowed") is not True
        or data.get("ok") is not True
        or not _KEPT.issuperset(k for k in data if k not in _IMPLIED)
    ):
        return None
    return {k: v for k, v in data.items() if k not in _IMPLIED}


def fold(
    ending: EventKind, task_id: str, agent: str, events: Sequence[Pending]
) -> dict[str, Any] | None:
    """The record, for the ending entry, of the ending call that is the settle's last entry;
    None: the call keeps its own entry (nothing to fold, or a call refused after the ending
    logged after it)."""
    if not events:
        return None
    return _carried(CARRIED_TOOL[ending], task_id, agent, events[-1])


def fold_delegation(written: list[Pending], events: Sequence[Pending]) -> Sequence[Pending]:
    """`events` to append after `written` (a transaction's entries so far), without their
    first when that is the delegate_task call of the subtask whose `delegated` entry is
    `written`'s last: that call is then put in the entry, as its `call`."""
    if not events or not written or type(events[0]) is not SubtaskCall:
        return events
    entry = events[0]
    kind, subtask, agent, data = written[-1]
    if kind != EventKind.DELEGATED or subtask != entry.subtask:
        return events
    call = _carried(DELEGATE_TOOL, data.get("parent_id"), agent, entry)
    if call is None:
        return events
    written[-1] = (kind, subtask, agent, {**data, "call": call})
    return events[1:]


def call_of(kind: str, data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The `tool_call` data an entry carries, as its own entry would have held it; None for
    any other entry, or a carrier without one (an old log's, a session that ended without the
    call, a delegation whose call was logged on its own)."""
    if data is None or kind not in CARRIED_TOOL:
        return None
    call = data.get("call")
    if not isinstance(call, dict):
        return None
    return {**call, "allowed": True, "ok": True}


class _Entry(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def task_id(self) -> str | None: ...
    @property
    def data(self) -> Any: ...


E = TypeVar("E", bound=_Entry)


def as_call(e: E) -> E | None:
    """The call an entry carries, as a `tool_call` entry of the carrier's seq and time, made
    by the calling task and agent (a copy: the entry is not changed); None if it carries none."""
    call = call_of(e.kind, e.data)
    if call is None:
        return None
    task_id = e.data.get("parent_id") if e.kind == EventKind.DELEGATED else e.task_id
    return dataclasses.replace(e, kind=EventKind.TOOL_CALL, task_id=task_id, data=call)  # type: ignore[type-var]


def with_calls(entries: Iterable[E]) -> Iterator[E]:
    """Every entry, and each call one carries (`as_call`) where its own entry would have been:
    before the ending that carries it, after the delegation."""
    for e in entries:
        call = as_call(e)
        if call is None:
            yield e
        elif e.kind == EventKind.DELEGATED:
            yield e
            yield call
        else:
            yield call
            yield e
