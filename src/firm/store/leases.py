"""Claims and leases: workers claim todo tasks under the store-wide cap, renew or release
their leases, and recovery takes back tasks whose worker died or whose lease expired.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import Row, bindparam, delete, exists, func, insert, or_, select, update

from firm.errors import StoreError
from firm.events import EventKind
from firm.store import queries as Q
from firm.store import schema
from firm.store.prepared import run
from firm.store.retry import retrying
from firm.store.rows import task_from_row
from firm.store.transaction import Tx
from firm.store.tree import TaskTree
from firm.tasks import Status, Task

T = schema.tasks

# Whether recovery could find anything: a task in progress (its worker may be dead or its
# lease out) or one waiting (it may have nothing open left). Neither on most stores an engine
# starts on — always so on one just created — and then recovery is this read: no write lock,
# and none of its statements compiled (they are built per call, and SQLAlchemy's compiled
# cache is per engine: a process that opens a new store per run compiled them every time).
RECOVERABLE = select(
    exists().where(schema.status_is(T.c.status, Status.IN_PROGRESS))
    | exists().where(schema.status_is(T.c.status, Status.WAITING))
)

# A stopping engine hands back what it runs (a team's start stops one per run). On SQLite
# built once, the ids as one JSON array, so it runs prebuilt (store/prepared.py) instead of
# being compiled by every store's engine.
_IDS = func.json_each(bindparam("ids_json")).table_valued("value")
RELEASE = (
    update(T)
    .where(
        T.c.id.in_(select(_IDS.c.value)),
        T.c.worker_id == bindparam("worker"),
        T.c.status == str(Status.IN_PROGRESS),
    )
    .values(
        status=str(Status.TODO), worker_id=None, lease_expires_at=None, updated_at=bindparam("now")
    )
    .returning(T.c.id, T.c.assignee)
)

_CLAIM_LOCK = 0x6669726D01  # the advisory lock capped claims take turns under (PostgreSQL)


def _requeue_reason(
    worker: str | None, expires: float | None, dead: bool, now: float
) -> tuple[str, str]:
    """Why recovery took a task back, for the audit log: which worker, and how we know."""
    rerun = "its session will be re-run from the start of its turn"
    if worker is None:
        return "no_worker", f"no worker held it; {rerun}"
    if dead:
        return "worker_dead", f"worker {worker} is no longer running (its process is gone); {rerun}"
    late = f" {now - expires:.1f}s ago" if expires is not None else ""
    return (
        "lease_expired",
        f"worker {worker} lost its lease (expired{late}: the worker died, hung or lost the "
        f"database); {rerun}",
    )


def claim_top(
    tx: Tx, worker_id: str, limit: int, lease_seconds: float, global_limit: int | None = None
) -> list[Task]:
    """Claim up to `limit` todo tasks, in claim order, for `worker_id` inside `tx`, within
    the store-wide cap (read from `meta` unless `global_limit` is given)."""
    lease = {"p_worker": worker_id, "p_lease": tx.now + lease_seconds, "p_now": tx.now}
    if global_limit is None and not tx.locking:
        # SQLite, the store's own cap: read inside the claim's one statement.
        rows = run(tx.conn, Q.CLAIM_TOP_CAPPED, {"p_limit": limit, **lease}).all()
        return _started(tx, rows, worker_id)
    if global_limit is None:  # the store's own cap (firm db limit), if one is set
        stored = run(tx.conn, Q.MAX_RUNNING).scalar()
        global_limit = int(stored) if stored is not None else None
    if global_limit is not None:
        if tx.locking:
            # Counting then claiming is a read-then-write: capped claims take turns so two
            # workers cannot both see room for the last slot.
            tx.conn.execute(select(func.pg_advisory_xact_lock(_CLAIM_LOCK)))
        running = run(tx.conn, Q.RUNNING_COUNT).scalar_one()
        limit = min(limit, global_limit - running)
        if limit <= 0:
            return []
    if tx.locking:
        ids = list(run(tx.conn, Q.CLAIM_PICK_SKIP_LOCKED, {"p_limit": limit}).scalars())
        if not ids:
            return []
        rows = tx.conn.execute(Q.CLAIM, {"p_ids": ids, **lease}).all()
    else:
        rows = run(tx.conn, Q.CLAIM_TOP, {"p_limit": limit, **lease}).all()
    return _started(tx, rows, worker_id)


def _started(tx: Tx, rows: Sequence[Row[Any]], worker_id: str) -> list[Task]:
    """The claimed rows as tasks in claim order, each with its `started` entry emitted."""
    claimed = sorted(
        (task_from_row(r) for r in rows), key=lambda t: (-t.priority, t.created_at, t.id)
    )
    for t in claimed:
        tx.emit(EventKind.STARTED, t, attempt=t.attempts, turn=t.turn, worker=worker_id)
    return claimed


class Leases(TaskTree):
    @retrying
    def claim(
        self, worker_id: str, limit: int, lease_seconds: float, global_limit: int | None = None
    ) -> list[Task]:
        if limit <= 0:
            return []
        with self._write() as tx:
            return claim_top(tx, worker_id, limit, lease_seconds, global_limit)

    @retrying
    def recover(self, worker_alive: Callable[[str], bool | None]) -> dict[str, list[str]]:
        """Invariant 5, set-based: requeue orphaned sessions, wake managers with nothing open.

        worker_alive(worker_id) says True/False when it can tell (a process on this host), or
        None when it cannot (another machine): then only an expired lease frees the task. Any
        worker may run this at any time; on PostgreSQL rows another transaction holds are
        skipped (whoever holds them settles or wakes them), so recovery never waits or deadlocks.
        """
        # What the write below would find is committed before this read, so when the read
        # finds nothing, the write would have changed nothing either.
        if not self._select(RECOVERABLE).scalar():
            return {"requeued": [], "woken": []}
        with self._write() as tx:
            holders = list(
                tx.conn.execute(
                    select(T.c.worker_id)
                    .distinct()
                    .where(schema.status_is(T.c.status, Status.IN_PROGRESS))
                ).scalars()
            )
            dead = {w for w in holders if w is not None and worker_alive(w) is False}
            stale = or_(
                T.c.lease_expires_at < tx.now,
                T.c.worker_id.is_(None),
                T.c.worker_id.in_(sorted(dead)),
            )
            pick = select(T.c.id, T.c.worker_id, T.c.lease_expires_at).where(
                schema.status_is(T.c.status, Status.IN_PROGRESS), stale
            )
            if tx.locking:
                pick = pick.with_for_update(skip_locked=True)
            orphans = {r[0]: (r[1], r[2]) for r in tx.conn.execute(pick)}
            requeued: Sequence[Any] = ()
            if orphans:
                requeued = tx.conn.execute(
                    update(T)
                    .where(T.c.id.in_(list(orphans)), T.c.status == str(Status.IN_PROGRESS))
                    .values(
                        status=str(Status.TODO),
                        worker_id=None,
                        lease_expires_at=None,
                        updated_at=tx.now,
                    )
                    .returning(T.c.id, T.c.assignee, T.c.attempts)
                ).all()
            for tid, assignee, attempts in requeued:
                worker, expires = orphans[tid]
                cause, reason = _requeue_reason(worker, expires, worker in dead, tx.now)
                tx.emit(
                    EventKind.REQUEUED,
                    tid,
                    assignee,
                    attempt=attempts,
                    worker=worker,
                    cause=cause,
                    reason=reason,
                )
            c = T.alias("c")
            idle = select(T.c.id).where(
                schema.status_is(T.c.status, Status.WAITING),
                ~exists().where(
                    c.c.parent_id == T.c.id, c.c.root_id == T.c.root_id, Q.is_open(c.c.status)
                ),
                Q.nothing_pending(T.c.id),
            )
            if tx.locking:
                idle = idle.with_for_update(of=T, skip_locked=True)
            idle_ids = list(tx.conn.execute(idle).scalars())
            woke: Sequence[Any] = ()
            if idle_ids:
                woke = tx.conn.execute(
                    update(T)
                    .where(
                        T.c.id.in_(idle_ids),
                        T.c.status == str(Status.WAITING),
                        ~exists().where(
                            c.c.parent_id == T.c.id,
                            c.c.root_id == T.c.root_id,
                            Q.is_open(c.c.status),
                        ),
                        Q.nothing_pending(T.c.id),
                    )
                    .values(status=str(Status.TODO), updated_at=tx.now)
                    .returning(T.c.id, T.c.assignee)
                ).all()
            for tid, assignee in woke:
                tx.emit(EventKind.WOKEN, tid, assignee, recovered=True)
        return {"requeued": [r[0] for r in requeued], "woken": [w[0] for w in woke]}

    @retrying
    def max_running(self) -> int | None:
        """The cap on sessions running at once across every worker of this store, if set."""
        value = self._select(Q.MAX_RUNNING).scalar()
        return int(value) if value is not None else None

    @retrying
    def set_max_running(self, limit: int | None) -> None:
        """Set (or, with None, lift) the store-wide cap every engine's claims respect."""
        if limit is not None and limit < 1:
            raise StoreError("the cap on running sessions must be at least 1")
        with self._write() as tx:
            meta = schema.meta
            tx.conn.execute(delete(meta).where(meta.c.key == "max_running"))
            if limit is not None:
                tx.conn.execute(insert(meta).values(key="max_running", value=str(limit)))
            tx.emit(EventKind.SETTING, None, None, max_running=limit)

    @retrying
    def renew_leases(
        self, worker_id: str, lease_seconds: float, task_ids: Iterable[str] | None = None
    ) -> list[str]:
        """Extend this worker's leases (only on task_ids, when given); returns the ids it still
        holds. A running session missing from the answer has lost its task to recovery (or a
        cancel) and should stop: another worker may be running it already."""
        with self._write() as tx:
            q = update(T).where(
                T.c.worker_id == worker_id, schema.status_is(T.c.status, Status.IN_PROGRESS)
            )
            if task_ids is not None:
                q = q.where(T.c.id.in_(list(task_ids)))
            rows = tx.conn.execute(
                q.values(lease_expires_at=tx.now + lease_seconds).returning(T.c.id)
            )
            return list(rows.scalars())

    @retrying
    def release(self, worker_id: str, task_ids: Iterable[str], reason: str) -> list[str]:
        """Hand sessions this worker cannot finish back to todo (a clean shutdown)."""
        ids = list(task_ids)
        if not ids:
            return []
        with self._write() as tx:
            if tx.locking:  # PostgreSQL
                rows = tx.conn.execute(
                    update(T)
                    .where(
                        T.c.id.in_(ids),
                        T.c.worker_id == worker_id,
                        T.c.status == str(Status.IN_PROGRESS),
                    )
                    .values(
                        status=str(Status.TODO),
                        worker_id=None,
                        lease_expires_at=None,
                        updated_at=tx.now,
                    )
                    .returning(T.c.id, T.c.assignee)
                ).all()
            else:
                params = {"ids_json": json.dumps(ids), "worker": worker_id, "now": tx.now}
                rows = run(tx.conn, RELEASE, params).all()
            for tid, assignee in rows:
                tx.emit(EventKind.REQUEUED, tid, assignee, reason=reason)
        return [r[0] for r in rows]
