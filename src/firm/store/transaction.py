"""A write transaction, the log entries it appends when it commits, and the clock it stamps."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import Connection, func, text

from firm.chain import canonical_json, entry_hash
from firm.events import EventKind, InvalidEvent, validate
from firm.store import notify
from firm.store import queries as Q
from firm.store.base import Event
from firm.store.prepared import run, run_many
from firm.tasks import Task


class Tx:
    """A write transaction plus the events it will append when it commits."""

    def __init__(self, conn: Connection, locking: bool, now: float):
        self.conn = conn
        self.locking = locking  # explicit row locks (PostgreSQL); SQLite holds the db lock
        self.now = now
        self.pending: list[tuple[str, str | None, str | None, dict[str, Any]]] = []
        self.appended: list[Event] = []

    def emit(
        self, kind: EventKind, task: Task | str | None, agent: str | None = None, **data: Any
    ) -> None:
        if isinstance(task, Task):
            task_id, agent = task.id, agent or task.assignee
        else:
            task_id = task
        self.pending.append((kind, task_id, agent, data))

    def flush(self) -> None:
        """Append pending events to the chain; called last, so the head lock is held briefly."""
        if not self.pending:
            return
        checked = [_checked(*item) for item in self.pending]  # before the head's lock
        head = Q.CHAIN_HEAD_FOR_UPDATE if self.locking else Q.CHAIN_HEAD
        seq, prev = run(self.conn, head).one()
        kinds = {kind for kind, *_ in checked}
        rows = []
        for kind, task_id, agent, data in checked:
            seq += 1
            h = entry_hash(prev, seq, self.now, kind, task_id, agent, data)
            rows.append(
                {
                    "seq": seq,
                    "ts": self.now,
                    "kind": kind,
                    "task_id": task_id,
                    "agent": agent,
                    "data": canonical_json(data),
                    "prev_hash": prev,
                    "hash": h,
                }
            )
            self.appended.append(Event(seq, self.now, kind, task_id, agent, data, prev, h))
            prev = h
        run_many(self.conn, Q.INSERT_EVENTS, rows)
        if self.locking:  # delivered at commit, in commit order, and only if it commits
            cancelled = [
                e.task_id for e in self.appended if e.kind == EventKind.CANCELLED and e.task_id
            ]
            note = notify.payload(seq, kinds, cancelled)
            move_head = Q.MOVE_HEAD.returning(func.pg_notify(notify.CHANNEL, note))  # one trip
            self.conn.execute(move_head, {"p_seq": seq, "p_hash": prev})
        else:
            run(self.conn, Q.MOVE_HEAD, {"p_seq": seq, "p_hash": prev})
        self.pending.clear()


def _checked(
    kind: str, task_id: str | None, agent: str | None, data: dict[str, Any]
) -> tuple[str, str | None, str | None, dict[str, Any]]:
    """The entry as it will be stored — its data canonical, so what is checked and hashed is
    exactly what is stored — if the event catalogue allows it; else InvalidEvent, and the
    transaction writes nothing."""
    try:
        data = json.loads(canonical_json(data))
    except (TypeError, ValueError) as exc:
        raise InvalidEvent(
            f"{kind} event of task {task_id}: its data is not JSON ({exc})"
        ) from None
    try:
        known = validate(kind, data)
    except InvalidEvent as exc:
        raise InvalidEvent(f"the store refuses an event of task {task_id}: {exc}") from None
    return known.value, task_id, agent, data


class DbClock:
    """Timestamps for writes. On PostgreSQL, the database server's clock: leases are written by
    one machine and judged by another, so they must not depend on each machine's clock. The
    offset to the server's clock is measured now and then, not asked for in every transaction."""

    refresh_every = 30.0

    def __init__(self, use_server: bool):
        self.use_server = use_server
        self.offset = 0.0
        self.measured_at = -self.refresh_every

    def now(self, conn: Connection) -> float:
        if self.use_server and time.monotonic() - self.measured_at > self.refresh_every:
            server = conn.execute(text("SELECT extract(epoch FROM clock_timestamp())")).scalar()
            self.offset = float(server) - time.time()
            self.measured_at = time.monotonic()
        return round(time.time() + self.offset, 6)
