"""A write transaction, the log entries it appends when it commits, and the clock it stamps."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from sqlalchemy import Connection, func, text

from firm.chain import canonical_json, header_hash
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
        self.checked: list[tuple[str, str | None, str | None, dict[str, Any], str, str]] = []
        self.appended: list[Event] = []

    def emit(
        self, kind: EventKind, task: Task | str | None, agent: str | None = None, **data: Any
    ) -> None:
        if isinstance(task, Task):
            task_id, agent = task.id, agent or task.assignee
        else:
            task_id = task
        self.pending.append((kind, task_id, agent, data))

    def check(self) -> None:
        """Make pending events canonical and check them against the catalogue: InvalidEvent
        fails this transaction (or this member of a group) alone, before the head is touched.
        Entries saying the same thing (a cancel's 10,000 entries share one reason) are read
        back and checked once."""
        seen: dict[tuple[str, str], tuple[str, dict[str, Any], str]] = {}
        texts: dict[int, str] = {}  # by the data's identity: entries sharing one dict
        self.checked = [_checked(*item, seen, texts) for item in self.pending]
        self.pending.clear()

    def flush(self) -> None:
        """Append pending events to the chain; called last, so the head lock is held briefly."""
        self.check()
        append_chain(self.conn, self.locking, [self])


def append_chain(conn: Connection, locking: bool, txs: list[Tx]) -> None:
    """Append the checked entries of these transactions to the chain, in this order, with one
    read of the head, one insert and one move of the head: the writes of one commit (a group
    of members, or one transaction alone). Fills each Tx's `appended`."""
    if not any(tx.checked for tx in txs):
        return
    head = Q.CHAIN_HEAD_FOR_UPDATE if locking else Q.CHAIN_HEAD
    seq, prev = run(conn, head).one()
    rows = []
    for tx in txs:
        now = tx.now
        for kind, task_id, agent, data, canonical, data_digest in tx.checked:
            seq += 1
            # entry_hash(prev, seq, ts, kind, task, agent, data), from the digest already made
            h = header_hash(prev, seq, now, kind, task_id, agent, data_digest)
            rows.append(
                {
                    "seq": seq,
                    "ts": now,
                    "kind": kind,
                    "task_id": task_id,
                    "agent": agent,
                    "data": canonical,
                    "prev_hash": prev,
                    "hash": h,
                }
            )
            tx.appended.append(Event(seq, now, kind, task_id, agent, data, prev, h))
            prev = h
        tx.checked = []
    run_many(conn, Q.INSERT_EVENTS, rows)
    if locking:  # delivered at commit, in commit order, and only if it commits
        note = notify.payload(seq, [e for tx in txs for e in tx.appended])
        move_head = Q.MOVE_HEAD.returning(func.pg_notify(notify.CHANNEL, note))  # one trip
        conn.execute(move_head, {"p_seq": seq, "p_hash": prev})
    else:
        run(conn, Q.MOVE_HEAD, {"p_seq": seq, "p_hash": prev})


def _checked(
    kind: str,
    task_id: str | None,
    agent: str | None,
    data: dict[str, Any],
    seen: dict[tuple[str, str], tuple[str, dict[str, Any], str]],
    texts: dict[int, str] | None = None,
) -> tuple[str, str | None, str | None, dict[str, Any], str, str]:
    """The entry as it will be stored — its data canonical, so what is checked and hashed is
    exactly what is stored — if the event catalogue allows it; else InvalidEvent, and the
    transaction writes nothing. Then the data's canonical text, what is stored (the canonical
    text of JSON read back from canonical text is that text), and its digest, what is hashed.
    `seen` holds the entries of this transaction already checked, by kind and text."""
    text = texts.get(id(data)) if texts is not None else None
    if text is None:
        try:
            text = canonical_json(data)
        except (TypeError, ValueError) as exc:
            raise InvalidEvent(
                f"{kind} event of task {task_id}: its data is not JSON ({exc})"
            ) from None
        if texts is not None:
            texts[id(data)] = text
    known = seen.get((kind, text))
    if known is None:
        try:
            stored = json.loads(text)
            kind_value = validate(kind, stored).value
        except InvalidEvent as exc:
            raise InvalidEvent(f"the store refuses an event of task {task_id}: {exc}") from None
        known = (kind_value, stored, hashlib.sha256(text.encode()).hexdigest())
        seen[(kind, text)] = known
    kind_value, stored, data_digest = known
    return kind_value, task_id, agent, stored, text, data_digest


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
