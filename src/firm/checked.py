"""A tool call's check and its write-ahead record in one write transaction.

A call that needs no person (not a lifecycle call, no approval rule) used to read its
standing, check it, then commit its start in a write of its own: a read and a write. Here the
write reads the task's row with the log's head (store/checked.py), the check runs on that
state inside the transaction, in memory, and the same write appends the call's start — or its
denial — after the entries the session owes. What is logged, in what order, and what
`checked_seq` means are as before: the head at which the state the check saw was read, now
read under the write lock, just before the entry.

Why the invariants hold: the body runs only after the commit that carries its start; a session
whose task was cancelled or handed to another worker writes nothing and stops (a revoked one
is denied, and logged, as revoked); a denial is logged, and revokes per the chart's on_denial,
as before. The decision touches no store (the write lock is not re-entrant): the ancestors and
a budgeted task's reserved tokens are read before the write, as a check read them before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from firm.audit import recordable
from firm.authority.check import Denial
from firm.brains.protocol import SessionCancelled, ToolResult
from firm.callrecord import CallRecord
from firm.clock import Clock
from firm.errors import ToolError
from firm.events import EventKind
from firm.store.base import CheckState, PendingEvents
from firm.tasks import Status
from firm.tools.arguments import canonical_arguments
from firm.tools.registry import ToolDef

if TYPE_CHECKING:
    from firm.session import Session

Entry = tuple[str, str | None, str | None, dict[str, Any]]


class _Place:
    """Where a check will stand before it has read the head: its time, a seq to replace."""

    __slots__ = ("checked_at", "checked_seq")

    def __init__(self, checked_seq: int, checked_at: float):
        self.checked_seq = checked_seq
        self.checked_at = checked_at


class _Verdict:
    __slots__ = ("denial", "fresh", "record")

    def __init__(self, denial: Denial | None, fresh: CheckState, record: CallRecord | None):
        self.denial = denial
        self.fresh = fresh
        self.record = record  # None: the session lost its task, and nothing was written


def attempt(
    session: Session, tool: ToolDef | None, arguments: Mapping[str, Any] | str | None
) -> ToolResult | None:
    """The call checked and recorded in one write, when it is a tool call that needs no person
    and its arguments are good; otherwise None, and the session's other path takes it (which
    refuses bad arguments after its own read of the task, so a lost task stops it first)."""
    if tool is None or tool.lifecycle or session.company.approval_for(session.task, tool):
        return None
    parsed = parse(session.clock, tool, arguments)
    return None if parsed is None else call(session, tool, *parsed)


def parse(
    clock: Clock, tool: ToolDef, arguments: Mapping[str, Any] | str | None
) -> tuple[dict[str, Any], frozenset[str], CallRecord] | None:
    """The call's arguments and its record, proven recordable, before its write (its place in
    the log is filled in there); None when they are refused."""
    try:
        canonical = canonical_arguments(tool.model_name, arguments)
        args, given = tool.parse(canonical)
        record = CallRecord.prepare(tool, args, given, _Place(0, round(clock.now(), 6)))
    except ToolError:
        return None
    return args, given, record


def call(
    session: Session,
    tool: ToolDef,
    args: dict[str, Any],
    given: frozenset[str],
    record: CallRecord,
) -> ToolResult:
    """Check the call and record it in one write; then, if it was granted, run its body."""
    _, revoked = session.learn_ancestors()
    reserved = session._reserved()
    at = record.data["checked_at"]

    def decide(fresh: CheckState) -> tuple[_Verdict, PendingEvents]:
        standing = session.standing_of(fresh, reserved, at, revoked)
        stands = not any(link.revoked for link in standing.lineage)
        if stands and _lost(session, fresh):
            return _Verdict(None, fresh, None), ()
        placed = record.at_seq(fresh.head_seq)
        denial = session.company.check(standing, tool, args, given)
        if denial is None:
            entry = (EventKind.TOOL_STARTED, session.task_id, session.agent_id, dict(placed.data))
            return _Verdict(None, fresh, placed), [entry]
        return _Verdict(denial, fresh, placed), [denied(session, placed, denial)]

    owed = session.take_deferred()
    try:
        verdict, appended = session.store.append_checked(session.task_id, owed, decide)
    except BaseException:
        # Nothing was written: what was owed is still owed (the settle may carry it).
        session._deferred = owed + session._deferred
        raise
    # The state the call stood in: an ending call may be checked on it (firm/ending.py).
    session._seen = verdict.fresh if verdict.record and not verdict.fresh.revoked else None
    if verdict.record is None:
        session._deferred = owed + session._deferred
        session._stop_if_cancelled(verdict.fresh)
        raise SessionCancelled(f"task {session.task_id} was cancelled")  # not reached
    if verdict.denial is not None:
        after_denial(session, tool, verdict.denial)
        return ToolResult(False, f"error: {verdict.denial}", verdict.denial)
    # Write-ahead: the start is committed, so no body runs unrecorded — not even one whose
    # session is killed, or whose store fails, before the result can be written.
    content, ok = session.run_body(tool, args)
    session._log_call(tool, verdict.record, content, ok, appended[-1].seq)
    return ToolResult(ok, content)


def _lost(session: Session, fresh: CheckState) -> bool:
    """Whether the session must stop rather than act: cancelled, or its task gone from it."""
    return (
        session.cancel_signalled()
        or fresh.status != Status.IN_PROGRESS
        or fresh.worker_id != session.worker_id
    )


def denied(session: Session, record: CallRecord, denial: Denial) -> Entry:
    """A denied call's entry: its record with the denial's code and reason."""
    data = {
        **record.data,
        "allowed": False,
        "code": denial.code,
        "reason": recordable.text(denial.reason),
    }
    return (EventKind.TOOL_DENIED, session.task_id, session.agent_id, data)


def after_denial(session: Session, tool: ToolDef, denial: Denial) -> None:
    """What a logged denial does next: revoke the task when the chart says so."""
    if denial.code != "revoked" and session.company.on_denial(session.task, denial):
        session._revoke(
            session.task_id,
            f"{denial.code} on {tool.name} (on_denial: revoke)",
            "policy",
        )
