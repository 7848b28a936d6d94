"""Plans: the delegations of one manager's turn, waiting together for a person's approval.

A manager under an `approvals:` rule with `delegations: true` delegates as usual, but each
subtask is written with `held_by_plan` naming its turn's plan: it is `todo` and not claimed.
When the turn ends (the settle that yields), the held subtasks become one pending approval —
a row of the approvals table whose tool is `delegate_task` and whose arguments list every
delegation (assignee, title, brief, granted tools). The approval's decision is the plan's:

- approved: the subtasks are released (claimable) in the transaction that records it;
- denied or timed out: they are cancelled, with the person's reason, in that transaction, and
  the manager wakes to a brief that gives the reason as a tool error it can act on;
- withdrawn: the manager was cancelled, and its subtasks with it.

The manager waits like any manager waiting for its reports: it holds no worker.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import select, update

from firm.chain import canonical_json, digest
from firm.events import EventKind
from firm.store import schema
from firm.store.approvals import (
    APPROVED,
    DENIED,
    PENDING,
    PLAN_TOOL,
    TIMED_OUT,
    WITHDRAWN,
    Approval,
    Approvals,
)
from firm.store.transaction import Tx
from firm.tasks import Outcome, Status, Task

A = schema.approvals
T = schema.tasks

BRIEF_MAX = 4000  # characters of a subtask's brief kept in the plan; the task keeps all of it
SUMMARY_MAX = 300


def plan_id(task_id: str, turn: int) -> str:
    """A plan's id follows from its manager's task and turn, so the subtasks delegated before
    the plan is written can name it (and a re-run of the same turn names the same plan)."""
    src = f"plan\x00{task_id}\x00{turn}"
    return "P-" + hashlib.sha256(src.encode()).hexdigest()[:12]


def is_plan(a: Approval) -> bool:
    return a.tool == PLAN_TOOL


def plan_items(a: Approval) -> list[dict[str, Any]]:
    """The delegations of a plan, as shown to a person."""
    items = a.args.get("delegations") if isinstance(a.args, dict) else None
    return list(items) if isinstance(items, list) else []


def plan_outcome(a: Approval) -> str:
    """What the manager is told of its plan's decision."""
    n = len(plan_items(a))
    what = f"your plan ({n} delegation{'s' if n != 1 else ''}: {a.summary})"
    who = a.decided_by or "someone"
    note = f" — {a.note}" if a.note else ""
    if a.status == DENIED:
        return (
            f"error: {what} was denied by {who}{note}. Its subtasks were cancelled before "
            "they started. Act on the reason: delegate again (a new plan, which waits for "
            "approval too), do the work another way, or fail the task."
        )
    if a.status == TIMED_OUT:
        return (
            f"error: {what} was denied: no one decided before its timeout. Its subtasks were "
            "cancelled before they started; you may delegate again (a new plan)."
        )
    if a.status == WITHDRAWN:
        return f"error: {what} was withdrawn ({a.note or 'the task was cancelled'})"
    if a.status == APPROVED:
        return f"{what} was approved by {who}{note}; its subtasks ran"
    return f"{what} waits for a person's approval (approval {a.id})"


def plan_of_turn(outcome: Outcome, rule: str, timeout: float | None) -> Outcome:
    """The outcome of a gated manager's session: yielded, its turn's held delegations become
    a plan; done or failed, they are cancelled (no one is left to read their results)."""
    return Outcome(
        outcome.kind,
        outcome.result,
        outcome.files,
        outcome.error,
        plan_rule=rule,
        plan_timeout=timeout,
    )


def _held(tx: Tx, pid: str) -> list[Any]:
    """The subtasks waiting for the plan, in the order they were delegated (their log order:
    the delegations of one reply share a timestamp)."""
    rows = tx.conn.execute(
        select(T).where(T.c.held_by_plan == pid, T.c.status == str(Status.TODO))
    ).all()
    if not rows:
        return []
    E = schema.events
    order = dict(
        tx.conn.execute(
            select(E.c.task_id, E.c.seq).where(
                E.c.kind == str(EventKind.DELEGATED), E.c.task_id.in_([r.id for r in rows])
            )
        ).all()
    )
    return sorted(rows, key=lambda r: (order.get(r.id, 0), r.created_at, r.id))


def open_plan(tx: Tx, task: Task, outcome: Outcome) -> int:
    """Within the settle of `task`'s turn: its held subtasks become one pending plan (when the
    turn yields and asked for one), or are cancelled (a turn that ended the task, or did not
    ask, leaves no one to approve them). Returns how many subtasks wait for the plan.

    A session of a gated manager always names its rule (`plan_rule`); other settles look only
    when the task failed (a crashed session cannot say), so the hot path costs no query."""
    if outcome.plan_rule is None and outcome.kind != "failed":
        return 0
    pid = plan_id(task.id, task.turn)
    rows = _held(tx, pid)
    if not rows:
        return 0
    if outcome.kind != "yielded" or outcome.plan_rule is None:
        _cancel_held(
            tx,
            pid,
            f"its delegator's task ended ({outcome.kind}) before its plan was put to a person",
            "policy",
        )
        return 0
    if tx.conn.execute(select(A.c.id).where(A.c.id == pid)).first() is not None:
        return len(rows)  # written by an earlier settle of this turn
    items = []
    for r in rows:
        grant = json.loads(r.grant) if r.grant else None
        items.append(
            {
                "task_id": r.id,
                "to": r.assignee,
                "title": r.title,
                "brief": r.description[:BRIEF_MAX],
                "tools": list(grant["scopes"]) if isinstance(grant, dict) else None,
            }
        )
    args = {"delegations": items}
    args_digest = digest(args)
    summary = "; ".join(f"{i['to']}: {i['title'][:80]}" for i in items)
    if len(summary) > SUMMARY_MAX:
        summary = summary[: SUMMARY_MAX - 1] + "…"
    timeout_at = None if outcome.plan_timeout is None else tx.now + outcome.plan_timeout
    tx.conn.execute(
        A.insert().values(
            id=pid,
            root_id=task.root_id,
            task_id=task.id,
            agent=task.assignee,
            turn=task.turn,
            tool=PLAN_TOOL,
            args=canonical_json(args),
            args_digest=args_digest,
            summary=summary,
            rule=outcome.plan_rule,
            status=PENDING,
            dedupe_key=hashlib.sha256(pid.encode()).hexdigest()[:40],
            requested_at=tx.now,
            timeout_at=timeout_at,
        )
    )
    tx.emit(
        EventKind.APPROVAL_REQUESTED,
        task,
        id=pid,
        tool=PLAN_TOOL,
        args_digest=args_digest,
        summary=summary,
        rule=outcome.plan_rule,
        timeout_at=timeout_at,
        subtasks=[i["task_id"] for i in items],
    )
    return len(rows)


def _cancel_held(tx: Tx, pid: str, reason: str, by: str) -> list[Task]:
    from firm.store.rows import task_from_row

    rows = tx.conn.execute(
        update(T)
        .where(T.c.held_by_plan == pid, T.c.status == str(Status.TODO))
        .values(
            status=str(Status.CANCELLED),
            error=reason,
            finished_at=tx.now,
            updated_at=tx.now,
        )
        .returning(*T.c)
    ).all()
    cancelled = sorted((task_from_row(r) for r in rows), key=lambda t: (t.created_at, t.id))
    for t in cancelled:
        tx.emit(EventKind.CANCELLED, t, reason=reason, by=by, plan=pid)
    return cancelled


class Plans(Approvals):
    def _decide(
        self, tx: Tx, items: list[Approval], decision: str, by: str, note: str | None
    ) -> list[Approval]:
        decided = super()._decide(tx, items, decision, by, note)
        for plan in (a for a in decided if is_plan(a)):
            if decision == APPROVED:
                # Claimable from this commit on; the scheduler hears of it from the decision.
                tx.conn.execute(
                    update(T)
                    .where(T.c.held_by_plan == plan.id, T.c.status == str(Status.TODO))
                    .values(held_by_plan=None, updated_at=tx.now)
                )
            elif decision in (DENIED, TIMED_OUT):
                why = (
                    "no one decided before its timeout"
                    if decision == TIMED_OUT
                    else f"denied by {by}" + (f": {note}" if note else "")
                )
                if _cancel_held(tx, plan.id, f"the plan {plan.id} was {why}", by):
                    self._wake_if_done(tx, plan.task_id)
        return decided
