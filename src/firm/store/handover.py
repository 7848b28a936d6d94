"""Hand-over: the settle that wakes a task claims it for the worker that settled.

A manager woken by its last report's settle would otherwise wait for a scheduler to notice
(a nudge, another thread, another write transaction to claim it). The worker whose session
just ended has a free slot — the one that session held — so the settle's own transaction
claims the woken task for it, and the worker runs it next. Concurrency is unchanged: one
session ends where one starts, so neither the engine's limit nor the store's cap can be
passed. It never jumps the queue: work of a higher priority already waiting goes first.
"""

from __future__ import annotations

from sqlalchemy import select

from firm.events import EventKind
from firm.store import queries as Q
from firm.store import schema
from firm.store.rows import task_from_row
from firm.store.transaction import Tx
from firm.tasks import Status, Task

T = schema.tasks


def claim_woken(tx: Tx, woke: list[str], worker_id: str, lease_seconds: float) -> list[Task]:
    """Claim the tasks this transaction woke for `worker_id`, unless waiting work outranks
    them; returns those claimed (each with its `started` entry emitted)."""
    if not woke:
        return []
    # The queue's head, read down the claim index: it stops at the first row that qualifies.
    ahead = tx.conn.execute(
        select(T.c.priority)
        .where(T.c.status == str(Status.TODO), T.c.held_by_plan.is_(None), T.c.id.not_in(woke))
        .order_by(T.c.priority.desc())
        .limit(1)
    ).scalar()
    claim = Q.CLAIM if ahead is None else Q.CLAIM.where(T.c.priority >= ahead)
    lease = {"p_worker": worker_id, "p_lease": tx.now + lease_seconds, "p_now": tx.now}
    claimed = [task_from_row(r) for r in tx.conn.execute(claim, {"p_ids": woke, **lease}).all()]
    for t in claimed:
        tx.emit(EventKind.STARTED, t, attempt=t.attempts, turn=t.turn, worker=worker_id)
    return claimed
