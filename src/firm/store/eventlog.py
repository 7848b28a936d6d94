"""The event log: appending entries, reading them after a seq, waiting for new ones, the head."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, bindparam, func, or_, select

from firm.store import queries as Q
from firm.store import schema
from firm.store.base import Event
from firm.store.connection import SqlBase
from firm.store.prepared import run
from firm.store.retry import retrying
from firm.store.rows import event_from_row

E = schema.events
T = schema.tasks

# The plain and the most asked reads of the log, built once so they are compiled once per
# process (store/compiled.py), not once per store: SQLAlchemy's compiled cache is per engine,
# and a program that opens a new store per run (Team.start) compiled them every run.
AFTER = select(E).where(E.c.seq > bindparam("after")).order_by(E.c.seq).limit(bindparam("lim"))
# A few tasks' own entries, the tasks as one JSON array on SQLite (an expanding IN is
# compiled again for each number of them).
_IDS = func.json_each(bindparam("ids_json")).table_valued("value")
AFTER_OF_JSON = AFTER.where(E.c.task_id.in_(select(_IDS.c.value)))
# Those of some kinds only: a seek of (task_id, kind) for each pair, not every entry read.
_KINDS = func.json_each(bindparam("kinds_json")).table_valued("value")
AFTER_OF_JSON_KINDS = AFTER_OF_JSON.where(E.c.kind.in_(select(_KINDS.c.value)))


class EventLog(SqlBase):
    @retrying
    def append_events(
        self, items: list[tuple[str, str | None, str | None, dict[str, Any]]]
    ) -> list[Event]:
        with self._write() as tx:
            tx.pending.extend(items)
        return tx.appended

    @retrying
    def events_after(
        self,
        seq: int,
        limit: int = 1000,
        task_ids: Iterable[str] | None = None,
        with_cancels: bool = False,
        kinds: Iterable[str] | None = None,
    ) -> list[Event]:
        """Entries after `seq` in order; with `task_ids`, those tasks' own. `with_cancels` adds
        the cancel that ended each of them when it was written on an ancestor (one entry ends a
        whole subtree): a task's history then shows how it ended. `kinds` keeps the entries of
        those kinds only, as stored: a lifecycle call recorded inside its effect's entry
        (firm/endcall.py) is found under that entry's kind."""
        params: dict[str, Any] = {"after": seq, "lim": limit}
        wanted = None if kinds is None else list(kinds)
        if task_ids is None and wanted is None:
            return [event_from_row(r) for r in self._select(AFTER, params)]
        if task_ids is not None and not with_cancels and self.dialect == "sqlite":
            params["ids_json"] = json.dumps(list(task_ids))
            if wanted is None:
                return [event_from_row(r) for r in self._select(AFTER_OF_JSON, params)]
            params["kinds_json"] = json.dumps(wanted)
            return [event_from_row(r) for r in self._select(AFTER_OF_JSON_KINDS, params)]
        q = select(E).where(E.c.seq > seq).order_by(E.c.seq).limit(limit)
        if wanted is not None:
            q = q.where(E.c.kind.in_(wanted))
        if task_ids is not None:
            ids = list(task_ids)
            mine: ColumnElement[bool] = E.c.task_id.in_(ids)
            if with_cancels:
                ended_by = select(T.c.cancelled_by_seq).where(
                    T.c.id.in_(ids), T.c.cancelled_by_seq.is_not(None)
                )
                mine = or_(mine, E.c.seq.in_(ended_by))
            q = q.where(mine)
        with self._read() as conn:
            return [event_from_row(r) for r in conn.execute(q)]

    def wait_for_change(self, after_seq: int, timeout: float) -> bool:
        """Block until the log has an event after after_seq, or timeout; True if it has.

        Commits in this process wake the waiter at once; on PostgreSQL so do commits by any
        other process (LISTEN/NOTIFY), with a look at the chain head every few seconds as the
        safety net; on SQLite other processes' commits are seen by looking every poll interval.
        The log itself is the truth: read it with events_after(your last seq), and no event is
        ever missed, not even across a reconnect.
        """
        self._ensure_listening()
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                generation = self._generation
            if self.last_seq() > after_seq:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            listening = self._pg_listener is not None and self._pg_listener.connected.is_set()
            interval = self.listen_poll_interval if listening else self.poll_interval
            with self._changed:
                if self._generation == generation:  # nothing arrived since we looked
                    self._changed.wait(min(remaining, interval))

    @retrying
    def event_span(self, task_ids: Iterable[str]) -> tuple[int, int] | None:
        """The first and last seq of the events of these tasks, or None if they have none."""
        ids = list(task_ids)
        lo: int | None = None
        hi: int | None = None
        with self._read() as conn:
            for i in range(0, len(ids), 500):  # bounded IN lists, whatever the tree's size
                row = conn.execute(
                    select(func.min(E.c.seq), func.max(E.c.seq)).where(
                        E.c.task_id.in_(ids[i : i + 500])
                    )
                ).one()
                if row[0] is not None:
                    lo = row[0] if lo is None else min(lo, row[0])
                    hi = row[1] if hi is None else max(hi, row[1])
        return None if lo is None or hi is None else (lo, hi)

    @retrying
    def last_seq(self) -> int:
        with self._read() as conn:
            return run(conn, Q.LAST_SEQ).scalar_one()
