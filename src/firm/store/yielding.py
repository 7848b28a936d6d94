"""A turn that yields: the task waits for its reports (or a person), or goes straight back to
todo when nothing it waits for is still open (invariant 2).

Written by the settle of a session that yielded (store/delegation.py `settle`), and by the
delegation of a reply that ends its turn (`delegate_and_yield`), in that delegation's own
transaction: the manager is `waiting` after one commit, not two.
"""

from __future__ import annotations

from sqlalchemy import select

from firm.events import EventKind
from firm.store import queries as Q
from firm.store.base import PendingEvents
from firm.store.plans import open_plan
from firm.store.prepared import run
from firm.store.rows import task_from_row
from firm.store.transaction import Tx
from firm.tasks import Outcome, Status, Task

# A yielding task's open subtasks and calls waiting for a person, in one statement.
YIELD_COUNTS = select(Q.OPEN_CHILDREN.scalar_subquery(), Q.PENDING_APPROVALS.scalar_subquery())


def write_yield(
    tx: Tx, task: Task, outcome: Outcome, events: PendingEvents = ()
) -> tuple[Task, list[str]]:
    """In `tx`, holding `task`'s row (checked to be in progress under the yielding worker):
    the session's own entries, this turn's held delegations as one plan (or none), the
    status change and its `waiting` entry, and `woken` at once when nothing is open.
    Returns the task as it now stands and the ids woken (the task itself, or none)."""
    tx.pending.extend(events)  # the session's own record comes before its outcome
    open_plan(tx, task, outcome)  # this turn's held delegations: one plan, or none
    # A call waiting for a person holds the task like an open subtask does.
    still_open, asked = run(tx.conn, YIELD_COUNTS, {"id": task.id}).one()
    status = Status.WAITING if still_open or asked else Status.TODO
    yielded = {"p_id": task.id, "p_status": str(status), "p_now": tx.now}
    after = task_from_row(run(tx.conn, Q.SETTLE_YIELDED, yielded).one())
    if asked:
        tx.emit(EventKind.WAITING, task, open_subtasks=still_open, pending_approvals=asked)
    else:
        tx.emit(EventKind.WAITING, task, open_subtasks=still_open)
    if still_open or asked:
        return after, []
    tx.emit(EventKind.WOKEN, task, immediately=True)  # invariant 2: all finished already
    return after, [task.id]
