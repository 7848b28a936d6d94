"""Approvals: tool calls that wait for a person, their decisions, and the one run of each
approved body.

A waiting call is a second kind of wait beside open subtasks: the wake rule (queries.WAKE and
recovery) leaves a task `waiting` while it has a pending approval, and a decision wakes it in
the transaction that records it, under the task's row lock (invariant 1's shape). An approved
call is claimed (`running`) in a committed transaction before its body starts; a session that
finds a claim with no result knows the body may have run and reports that instead of running
it again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, Select, and_, bindparam, select, update
from sqlalchemy.exc import IntegrityError

from firm.errors import AlreadyDecided, ApprovalNotFound, TaskNotFound, TaskNotHeld
from firm.events import EventKind
from firm.store import schema
from firm.store.base import PendingEvents
from firm.store.prepared import run
from firm.store.retry import retrying
from firm.store.transaction import Tx
from firm.store.tree import TaskTree
from firm.tasks import Status

A = schema.approvals
T = schema.tasks

PENDING = "pending"
APPROVED = "approved"
DENIED = "denied"
TIMED_OUT = "timed_out"
WITHDRAWN = "withdrawn"
RUNNING = "running"  # claimed: the body is about to run, or ran and its result was lost
RAN = "ran"
INTERRUPTED = "interrupted"  # claimed, no result: the body may have run
DECISIONS = (APPROVED, DENIED, TIMED_OUT, WITHDRAWN)
# A plan (store/plans.py) is an approval of a turn's delegations: its tool is delegate_task,
# which is never itself gated (the lifecycle tools are not), and it has no body to run.
PLAN_TOOL = "delegate_task"
NOTE_MAX = 4000
# Rows of this tool are an agent's questions to a person (store/questions.py): the same kind of
# wait, but answered rather than decided, and never run. The approval paths leave them alone.
ASK_HUMAN = "ask_human"

# A waiting call past its timeout, if any: built once, so each engine's first look (and a
# process opening a new store per run makes many engines) does not compile it again.
_DUE_NOW = (
    select(A.c.id)
    .where(A.c.status == PENDING, A.c.timeout_at.is_not(None), A.c.timeout_at < bindparam("now"))
    .limit(1)
)


@dataclass(frozen=True)
class Approval:
    id: str
    root_id: str
    task_id: str
    agent: str
    turn: int
    tool: str
    args: dict[str, Any]
    args_digest: str
    summary: str
    rule: str
    status: str
    requested_at: float
    timeout_at: float | None
    decided_at: float | None
    decided_by: str | None
    note: str | None
    result: str | None
    ok: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": "plan" if self.tool == PLAN_TOOL else "call",
            "task_id": self.task_id,
            "root_id": self.root_id,
            "agent": self.agent,
            "tool": self.tool,
            "args": self.args,
            "args_digest": self.args_digest,
            "summary": self.summary,
            "rule": self.rule,
            "status": self.status,
            "requested_at": self.requested_at,
            "timeout_at": self.timeout_at,
            "decided_at": self.decided_at,
            "decided_by": self.decided_by,
            "note": self.note,
            "ok": self.ok,
        }


def approval_outcome(a: Approval) -> str:
    """What the agent is told of a decided call: its result, or why it did not run (as a
    tool error it can act on)."""
    if a.tool == PLAN_TOOL:
        from firm.store.plans import plan_outcome

        return plan_outcome(a)
    call = f"{a.tool} ({a.summary})" if a.summary else a.tool
    who = a.decided_by or "someone"
    note = f" — {a.note}" if a.note else ""
    if a.status == RAN:
        return f"{a.result}" if a.ok else f"{a.result or 'error: the call failed'}"
    if a.status == DENIED:
        return f"error: {call} was denied by {who}{note}; it did not run"
    if a.status == TIMED_OUT:
        return f"error: {call} was denied: no one decided before its timeout; it did not run"
    if a.status == WITHDRAWN:
        return f"error: {call} was withdrawn ({a.note or 'the task was cancelled'})"
    if a.status == INTERRUPTED:
        return (
            f"error: {call} was approved by {who} and started, but its session was cut off "
            "before it reported back: it MAY HAVE RUN; check its effect before asking again"
        )
    if a.status in (APPROVED, RUNNING):
        return f"{call} was approved by {who}{note} and runs before your next step"
    return f"{call} waits for a person's approval (approval {a.id})"


def approval_from_row(row: Row[Any]) -> Approval:
    m = row._mapping
    return Approval(
        id=m["id"],
        root_id=m["root_id"],
        task_id=m["task_id"],
        agent=m["agent"],
        turn=m["turn"],
        tool=m["tool"],
        args=json.loads(m["args"]),
        args_digest=m["args_digest"],
        summary=m["summary"],
        rule=m["rule"],
        status=m["status"],
        requested_at=m["requested_at"],
        timeout_at=m["timeout_at"],
        decided_at=m["decided_at"],
        decided_by=m["decided_by"],
        note=m["note"],
        result=m["result"],
        ok=None if m["ok"] is None else bool(m["ok"]),
    )


def new_approval_id() -> str:
    return "A-" + secrets.token_hex(4)


class Approvals(TaskTree):
    @retrying
    def request_approval(
        self,
        task_id: str,
        worker_id: str,
        *,
        tool: str,
        args_json: str,
        args_digest: str,
        summary: str,
        rule: str,
        timeout: float | None,
        checked_seq: int,
        events: PendingEvents = (),
    ) -> Approval:
        """Record a call that waits for a person, or return the one this turn already recorded
        for the same tool and arguments (a re-run of an interrupted session asks once)."""
        for _ in range(2):
            try:
                with self._write() as tx:
                    task = self._lock_task(tx, task_id)
                    if task is None:
                        raise TaskNotFound(task_id)
                    tx.pending.extend(events)
                    key_src = f"{task_id}\x00{task.turn}\x00{tool}\x00{args_digest}"
                    key = hashlib.sha256(key_src.encode()).hexdigest()[:40]
                    row = tx.conn.execute(select(A).where(A.c.dedupe_key == key)).first()
                    if row is not None:
                        return approval_from_row(row)
                    if task.status != Status.IN_PROGRESS or task.worker_id != worker_id:
                        raise TaskNotHeld(
                            f"task {task_id} is no longer this session's; the call is not "
                            "sent for approval"
                        )
                    values = {
                        "id": new_approval_id(),
                        "root_id": task.root_id,
                        "task_id": task_id,
                        "agent": task.assignee,
                        "turn": task.turn,
                        "tool": tool,
                        "args": args_json,
                        "args_digest": args_digest,
                        "summary": summary,
                        "rule": rule,
                        "status": PENDING,
                        "dedupe_key": key,
                        "requested_at": tx.now,
                        "timeout_at": None if timeout is None else tx.now + timeout,
                    }
                    row = tx.conn.execute(A.insert().values(values).returning(*A.c)).one()
                    approval = approval_from_row(row)
                    tx.emit(
                        EventKind.APPROVAL_REQUESTED,
                        task,
                        id=approval.id,
                        tool=tool,
                        args_digest=args_digest,
                        summary=summary,
                        rule=rule,
                        timeout_at=approval.timeout_at,
                        checked_seq=checked_seq,
                    )
                return approval
            except IntegrityError:
                continue  # an identical request committed first: read it
        with self._read() as conn:
            return approval_from_row(conn.execute(select(A).where(A.c.dedupe_key == key)).one())

    @retrying
    def decide_approval(
        self, approval_id: str, decision: str, by: str, note: str | None = None
    ) -> Approval:
        """Approve or deny a waiting call, waking its task if nothing else holds it. A second
        decision raises AlreadyDecided: the first one stands."""
        if decision not in (APPROVED, DENIED):
            raise ValueError(f"unknown decision {decision!r}")
        with self._read() as conn:
            head = conn.execute(
                select(A.c.task_id).where(A.c.id == approval_id, A.c.tool != ASK_HUMAN)
            ).first()
        if head is None:
            raise ApprovalNotFound(approval_id)
        late = False
        with self._write() as tx:
            self._lock_family(tx, head[0])  # the task's row: the wake is decided under it
            row = tx.conn.execute(select(A).where(A.c.id == approval_id)).one()
            current = approval_from_row(row)
            if current.status != PENDING:
                raise AlreadyDecided(
                    f"approval {approval_id} was already decided ({current.status}"
                    + (f" by {current.decided_by}" if current.decided_by else "")
                    + "); the first decision stands"
                )
            if current.timeout_at is not None and tx.now > current.timeout_at:
                # Too late for a person: it times out now, whatever was asked.
                self._decide(tx, [current], TIMED_OUT, "timeout", "no decision before the timeout")
                late = True
            else:
                decided = self._decide(tx, [current], decision, by, note)[0]
        if late:
            raise AlreadyDecided(f"approval {approval_id} timed out before this decision")
        return decided

    def _decide(
        self, tx: Tx, items: list[Approval], decision: str, by: str, note: str | None
    ) -> list[Approval]:
        ids = [a.id for a in items]
        values: dict[str, Any] = {"status": decision, "decided_at": tx.now, "decided_by": by}
        if note is not None:
            values["note"] = note[:NOTE_MAX]
        rows = tx.conn.execute(
            update(A)
            .where(A.c.id.in_(ids), A.c.status.in_([PENDING, APPROVED]))
            .values(values)
            .returning(*A.c)
        ).all()
        decided = [approval_from_row(r) for r in rows]
        for a in decided:
            data: dict[str, Any] = {
                "id": a.id,
                "decision": decision,
                "by": by,
                "tool": a.tool,
                "args_digest": a.args_digest,
            }
            if a.note:
                data["note"] = a.note
            tx.emit(EventKind.APPROVAL_DECIDED, a.task_id, a.agent, **data)
        if decision != WITHDRAWN:
            for task_id in sorted({a.task_id for a in decided}):
                self._wake_if_done(tx, task_id)
        return decided

    @retrying
    def expire_approvals(self) -> list[Approval]:
        """Deny, as timed out, every waiting call past its timeout (one statement finds them
        all); their tasks wake."""
        # A read first (indexed on status, timeout_at): the engine asks every heartbeat, and
        # nearly always nothing is due, so no write lock is taken for nothing.
        if self._select(_DUE_NOW, {"now": time.time()}).first() is None:
            return []
        with self._write() as tx:
            rows = tx.conn.execute(
                select(A).where(
                    A.c.status == PENDING, A.c.timeout_at.is_not(None), A.c.timeout_at < tx.now
                )
            ).all()
            due = [approval_from_row(r) for r in rows]
            if not due:
                return []
            for task_id in sorted({a.task_id for a in due}):
                self._lock_family(tx, task_id)
            return self._decide(tx, due, TIMED_OUT, "timeout", "no decision before the timeout")

    def _withdraw(self, tx: Tx, task_ids: list[str], by: str) -> None:
        """Within a cancel or revoke: the cancelled tasks' waiting and unrun calls are off."""
        if not task_ids:
            return
        rows = tx.conn.execute(
            select(A).where(
                A.c.task_id.in_(task_ids),
                (A.c.status == PENDING) | ((A.c.status == APPROVED) & (A.c.tool != PLAN_TOOL)),
            )
        ).all()
        if rows:
            self._decide(
                tx, [approval_from_row(r) for r in rows], WITHDRAWN, by, "the task was cancelled"
            )

    @retrying
    def claim_approved(self, task_id: str, worker_id: str) -> tuple[list[Approval], list[Approval]]:
        """Before a session's brain starts: claim its task's approved calls (each runs once),
        and mark calls claimed by an earlier session that never recorded a result as
        interrupted (they may have run). Returns (claimed now, found interrupted)."""
        with self._write() as tx:
            task = self._lock_task(tx, task_id)
            if task is None or task.status != Status.IN_PROGRESS or task.worker_id != worker_id:
                return [], []
            lost = tx.conn.execute(
                update(A)
                .where(A.c.task_id == task_id, A.c.status == RUNNING)
                .values(status=INTERRUPTED)
                .returning(*A.c)
            ).all()
            claimed = tx.conn.execute(
                update(A)
                .where(A.c.task_id == task_id, A.c.status == APPROVED, A.c.tool != PLAN_TOOL)
                .values(status=RUNNING, claimed_by=worker_id)
                .returning(*A.c)
            ).all()
            now = sorted((approval_from_row(r) for r in claimed), key=lambda a: a.requested_at)
            for a in now:
                tx.emit(
                    EventKind.APPROVAL_CLAIMED,
                    task,
                    id=a.id,
                    tool=a.tool,
                    args_digest=a.args_digest,
                    worker=worker_id,
                )
        return now, [approval_from_row(r) for r in lost]

    @retrying
    def finish_approved(
        self,
        approval_id: str,
        worker_id: str,
        result: str,
        ok: bool,
        events: PendingEvents = (),
    ) -> bool:
        """Record the result of a claimed call with its log entry, in one transaction."""
        with self._write() as tx:
            tx.pending.extend(events)
            done = tx.conn.execute(
                update(A)
                .where(
                    and_(A.c.id == approval_id, A.c.status == RUNNING),
                    A.c.claimed_by == worker_id,
                )
                .values(status=RAN, result=result, ok=ok)
                .returning(A.c.id)
            ).first()
        return done is not None

    @retrying
    def approvals(
        self,
        *,
        status: str | None = None,
        task_id: str | None = None,
        root_id: str | None = None,
        limit: int = 1000,
    ) -> list[Approval]:
        given = {"status": status, "task_id": task_id, "root_id": root_id}
        params = {k: v for k, v in given.items() if v is not None}
        q = _listing(tuple(params))
        with self._read() as conn:
            return [approval_from_row(r) for r in run(conn, q, {**params, "p_limit": limit})]

    @retrying
    def get_approval(self, approval_id: str) -> Approval:
        with self._read() as conn:
            row = conn.execute(
                select(A).where(A.c.id == approval_id, A.c.tool != ASK_HUMAN)
            ).first()
        if row is None:
            raise ApprovalNotFound(approval_id)
        return approval_from_row(row)


@functools.cache
def _listing(filters: tuple[str, ...]) -> Select[Any]:
    """The listing statement for one set of filters, built once (a session start runs one)."""
    q = select(A).where(A.c.tool != ASK_HUMAN)  # questions are listed apart (questions.py)
    for name in filters:
        q = q.where(A.c[name] == bindparam(name))
    return q.order_by(A.c.requested_at, A.c.id).limit(bindparam("p_limit"))
