"""A tool call's check and its record in one write transaction.

The write reads the task's row with the log's head (the facts `Reads.state_at_head` gives),
hands them to the caller's decision — the authority check, in memory — and appends what it
decided, the call's start or its denial, after the entries the session owes: one transaction
instead of a read and a write. On SQLite the state is read under the write lock, on the
writer's own connection (whose page cache outlives its commits; a read beside a busy writer
takes a pooled connection whose cache the last commit dropped). On PostgreSQL it is one
statement, so one snapshot of the row and the head, as `state_at_head` reads them; the row is
not locked. A lock would hold nothing a user relies on — the body runs after the commit, and
a cancel may land at any moment of it, as before; the settle is what refuses a task lost
meanwhile — and it would put a row lock in every tool call's write, which a whole group's
commit then waits behind (a subtree's cancel by another worker holds its rows until it
commits) and which can close a cycle with another worker's settle of a child.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from firm.store.base import CheckState, Event, PendingEvents
from firm.store.connection import SqlBase
from firm.store.prepared import run
from firm.store.reads import STATE_AT_HEAD, check_state
from firm.store.retry import retrying

V = TypeVar("V")


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
            row = run(tx.conn, STATE_AT_HEAD, {"id": task_id}).first()
            state = check_state(task_id, row)
            verdict, entries = decide(state)
            if entries:
                tx.pending.extend(owed)
                tx.pending.extend(entries)
        return verdict, tx.appended


Entry = tuple[str, str | None, str | None, dict[str, Any]]


class SettleChecked(tuple[str, str | None, str | None, dict[str, Any]]):
    """A pending entry whose call the settle's write finishes checking: a call that ends the
    session (complete_task, fail_task; firm/ending.py). Its effect is the settle's, and what
    its check would read of the store — the task still held here, so neither cancelled nor
    revoked — is what the settle's guarded UPDATE proves; so the settle hands `decide` the
    task's state at the head its write read, and writes what it returns in the entry's place:
    the call placed at that head, its denial, or the entry as it was checked, on the last state
    its session read (which is also how it is written any other way: a session cut off before
    its settle)."""

    decide: Callable[[CheckState], PendingEvents]

    def __new__(cls, entry: Entry, decide: Callable[[CheckState], PendingEvents]) -> SettleChecked:
        made = super().__new__(cls, entry)
        made.decide = decide
        return made


def split_at_check(
    events: PendingEvents,
) -> tuple[PendingEvents, SettleChecked | None, PendingEvents]:
    """The entries before the first one a settle checks, that one (None: none), the rest."""
    for i, entry in enumerate(events):
        if type(entry) is SettleChecked:
            return events[:i], entry, events[i + 1 :]
    return events, None, ()
