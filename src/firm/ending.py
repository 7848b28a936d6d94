"""complete_task and fail_task checked by the settle's write, not by a read of their own.

A call that ends the session changes nothing until the settle writes its outcome, and the
settle changes the task only while this worker still holds it (its guarded UPDATE). What a
check of such a call reads of the store is exactly what that UPDATE proves: a task still in
progress under this worker is neither cancelled nor handed over, nor revoked (a revocation
cancels the open tasks it marks, in the same statement). Its expiry needs no store at all.
So the call is checked in memory — on the state this session's last check read, at the
moment of the call — its body runs, and its entry rides the settle, which places the check
at the head its UPDATE read (store/checked.SettleChecked): one read fewer for every session
that ends by a call, a leaf's above all.

What the log says: a settle that applies places the call at the head its UPDATE read, where
the task was proven to stand. A settle refused (the task cancelled, or handed to another
worker) writes the session's calls as superseded, as it always did, the ending among them as
it was checked — on the state read at its checked_seq, before the loss — unless the task was
revoked: then the ending is denied, at the head the refusal read, as a check that read the
revocation would have denied it (the session's brain heard "completed" and cannot act on
either, its session being over; a revocation in this process signals the session first, and
then the call is checked the usual way, so the brain is told). The delegate_task calls of one
reply share one reading for the same reason (firm/lifecycle.py): the write that carries their
effect refuses a lost task, so a reading per call would decide nothing that write does not.

Taken only when nothing else could answer differently: the company's own check and offer
(a subclass may look at more), no open batch of delegations, no token budget (whose reserve
is read), and a state read while the task stood. Anything else — bad arguments, a denial, a
body that refuses — goes the usual way, which reads, checks, and logs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from firm import checked
from firm.authority.policy import AuthorityPolicy
from firm.brains.protocol import ToolResult
from firm.callrecord import CallRecord, refusal
from firm.errors import ToolError
from firm.events import EventKind
from firm.store.base import CheckState, PendingEvents
from firm.store.checked import SettleChecked
from firm.tasks import Status
from firm.tools.arguments import canonical_arguments
from firm.tools.builtin import COMPLETE, FAIL
from firm.tools.registry import ToolDef

if TYPE_CHECKING:
    from firm.session import Session


def attempt(
    session: Session, tool: ToolDef | None, arguments: Mapping[str, Any] | str | None
) -> ToolResult | None:
    """The ending call checked in memory, its entry left for the settle to place; None when
    the usual way must take it."""
    seen = session._seen  # what the session's last check read, while the task stood
    if (
        seen is None
        or tool is None
        or (tool is not COMPLETE and tool is not FAIL)
        or session._batch is not None
        or session.cancel_signalled()
        or session.grant.budget_tokens is not None
        or not _plain_policy(session)
    ):
        return None
    try:
        args, given = tool.parse(canonical_arguments(tool.model_name, arguments))
        at = round(session.clock.now(), 6)
        record = CallRecord.prepare(tool, args, given, checked._Place(seen.head_seq, at))
    except ToolError:
        return None
    if session.company.check(session.standing_of(seen, 0, at), tool, args, given) is not None:
        return None  # expired: denied the usual way, on a fresh read
    content, ok = session.run_body(tool, args)
    if not ok:
        # Its body refused (a file not in the workspace) and set nothing: the usual way checks
        # it on a fresh read, runs the body again, and logs the refusal where it was checked.
        return None
    session._log_call(tool, record, content, ok, None)
    entry = session._deferred[-1]

    def decide(state: CheckState) -> PendingEvents:
        placed = {**entry[3], "checked_seq": state.head_seq}
        if _holds(session, state):
            return [(entry[0], entry[1], entry[2], placed)]
        denial = session.company.check(session.standing_of(state, 0, at), tool, args, given)
        if denial is None:
            return [entry]  # lost, not revoked: as checked, with the session's other calls
        return [checked.denied(session, record.at_seq(state.head_seq), denial)]

    session._deferred[-1] = SettleChecked(entry, decide)
    return ToolResult(True, content)


def _holds(session: Session, state: CheckState) -> bool:
    return (
        state.status == Status.IN_PROGRESS
        and state.worker_id == session.worker_id
        and not state.revoked
    )


def _plain_policy(session: Session) -> bool:
    """The company's check and offer are the grant algebra's own: complete_task and
    fail_task are offered, and judged by revocation and expiry alone."""
    kind = type(session.company)
    return (
        getattr(kind, "check", None) is AuthorityPolicy.check
        and getattr(kind, "offered", None) is AuthorityPolicy.offered
    )


def refused_after_end(session: Session, name: str) -> ToolResult:
    """A call made after complete_task or fail_task (later in the same reply, say), or after a
    reply whose delegations ended the turn, is not run. Its refusal rides with the ending's own
    entry, into the settle, after it (after a turn ended by its delegations, with the session's
    entries left after that commit: engine/leftover.py)."""
    assert session.outcome is not None
    message = (
        f"this task has already ended ({session.outcome.kind}); calls after "
        "complete_task or fail_task are not run"
    )
    if session.outcome.kind == "yielded":
        message = (
            "this task has already ended (yielded): your turn ended with your delegations; "
            "calls after it are not run (make them again when you are woken)"
        )
    if session.awaiting:
        message = (
            f"your turn has ended: {session.awaiting[-1]} waits for a person; "
            "calls after it are not run (make them again when you are woken)"
        )
    session._deferred.append(
        (EventKind.TOOL_ERROR, session.task_id, session.agent_id, refusal(name, message))
    )
    return ToolResult(False, f"error: {message}")
