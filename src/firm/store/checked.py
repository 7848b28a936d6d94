"""A tool call's check and its record in one write transaction.

The write reads the task's row with the log's head (the facts `Reads.state_at_head` gives),
hands them to the caller's decision — the authority check, in memory — and appends what it
decided, the call's start or its denial, after the entries the session owes. The state is
read under the write lock (on SQLite the writer's own connection, whose page cache outlives
its commits; on PostgreSQL the row is locked until the commit, so nothing that would change
the decision — a cancel, a revocation, a re-claim — can commit between the check and its
record), and the call costs one transaction instead of a read and a write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from firm.store import schema
from firm.store.base import CheckState, Event, PendingEvents
from firm.store.connection import SqlBase
from firm.store.prepared import run
from firm.store.reads import STATE_AT_HEAD, check_state
from firm.store.retry import retrying

V = TypeVar("V")

# PostgreSQL: the row locked as every write that changes a task locks it (FOR UPDATE), the
# head read in the same statement; the head's own lock is taken at the commit, last, as ever.
_STATE_LOCKED = STATE_AT_HEAD.with_for_update(of=schema.tasks)


class CheckedWrites(SqlBase):
    @retrying
    def append_checked(
        self,
        task_id: str,
        owed: PendingEvents,
        decide: Callable[[CheckState], tuple[V, PendingEvents]],
    ) -> tuple[V, list[Event]]:
        """Read the task's state at the head inside a write, call `decide` with it, and append
        the entries it returns after `owed`; nothing at all when it returns none (the owed
        entries stay the caller's). Returns what `decide` returned first and the appended
        entries. `decide` runs inside the transaction, so it must not touch the store (a
        write there is refused), and it may run more than once: a transient error re-runs
        the whole write."""
        with self._write() as tx:
            stmt = _STATE_LOCKED if tx.locking else STATE_AT_HEAD
            state = check_state(task_id, run(tx.conn, stmt, {"id": task_id}).first())
            verdict, entries = decide(state)
            if entries:
                tx.pending.extend(owed)
                tx.pending.extend(entries)
        return verdict, tx.appended
